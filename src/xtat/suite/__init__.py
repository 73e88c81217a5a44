"""The model suite: real architectures at a `small` (2 CPU cores) and a `large`
(one accelerator) size, each as a training step and an inference step.

Every module of this package that defines `ENTRIES: list[SuiteEntry]` joins
the suite; `xtat suite list` shows them and `xtat tune suite:NAME/FORM`
tunes one (FORM is `train` or `inference`; `suite:NAME` means train).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from xtat.capture.workload import Workload
from xtat.core.errors import UserError

FORMS = ("train", "inference")
MISSING = "the model suite is built with flax, optax and blackjax: pip install 'xtat[suite]'"
SIZES = ("small", "large")


@dataclass(frozen=True)
class SuiteEntry:
    name: str  # e.g. "moe-glam"; unique across the suite
    family: str  # e.g. "mixture of experts"
    description: str  # one line: the architecture and its small size
    train: Callable[[str], Workload]  # size -> training step (loss, grads, optax update)
    inference: Callable[[str], Workload]  # size -> inference step
    knobs: tuple[str, ...] = ()  # xtat.knob names the workload declares

    def workload(self, form: str = "train", size: str = "small") -> Workload:
        if form not in FORMS:
            raise UserError(f"suite form {form!r}: choose one of {', '.join(FORMS)}")
        if size not in SIZES:
            raise UserError(f"suite size {size!r}: choose one of {', '.join(SIZES)}")
        workload = (self.train if form == "train" else self.inference)(size)
        if workload.name is None or not workload.name.startswith(self.name):
            workload = dataclasses.replace(workload, name=f"{self.name}/{form}")
        return workload


def entries() -> dict[str, SuiteEntry]:
    """Every suite entry by name, in module then declaration order."""
    found: dict[str, SuiteEntry] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        try:
            module = importlib.import_module(f"{__name__}.{module_info.name}")
        except ImportError as exc:
            raise UserError(f"{MISSING} ({exc})") from exc
        for entry in getattr(module, "ENTRIES", ()):
            if entry.name in found:
                raise RuntimeError(f"suite entry {entry.name!r} is defined twice")
            found[entry.name] = entry
    return found


def suite_workload(spec: str, size: str = "small") -> Workload:
    """`NAME`, `NAME/train` or `NAME/inference` -> the workload."""
    name, _, form = spec.partition("/")
    known = entries()
    if name not in known:
        raise UserError(f"suite workload {name!r} does not exist; `xtat suite list` shows the "
                        f"{len(known)} there are")
    return known[name].workload(form or "train", size)
