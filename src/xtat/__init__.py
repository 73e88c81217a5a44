"""xtat: an autotuner for the XLA compiler as used through JAX.

The public API: `tune` a `Workload` (optionally with `TuneSettings`; it returns a
`TuneResult`), apply the result with `jit`, a drop-in for `jax.jit`, and declare program-level
choices with `knob`, and name the dimensions of a workload's inputs with `dims` and of its
intermediates with `constrain` (for the sharding stage). Everything else is private until a user needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what static tools see; at run time every name loads on first use
    from xtat.apply.jit import jit
    from xtat.capture.dimnames import constrain, dims
    from xtat.capture.workload import Workload
    from xtat.stages.program.knobs import knob
    from xtat.tuner import tune
    from xtat.tuning.result import TuneResult
    from xtat.tuning.settings import TuneSettings

__all__ = ["TuneResult", "TuneSettings", "Workload", "constrain", "dims", "jit", "knob", "tune"]
__version__ = "0.1.0"

_LAZY = {
    "Workload": "xtat.capture.workload",
    "dims": "xtat.capture.dimnames",
    "constrain": "xtat.capture.dimnames",
    "tune": "xtat.tuner",
    "jit": "xtat.apply.jit",
    "knob": "xtat.stages.program.knobs",
    "TuneSettings": "xtat.tuning.settings",
    "TuneResult": "xtat.tuning.result",
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import xtat` stays cheap for worker processes and the CLI.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'xtat' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
