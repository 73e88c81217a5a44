"""Targets: where a workload comes from, `package.module:attr`, `path/to/file.py:attr` or
`suite:NAME[/FORM]`, resolved to a Workload named after it.

Workers import targets too (a program with host callbacks is traced where it runs), so a
target is only ever a name: nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path

from xtat.capture.workload import Workload
from xtat.core.errors import UserError

# The suite builds Workloads, so it sits above capture; `suite:NAME` is resolved by importing it
# by name, as every module target is.
SUITE = "xtat.suite"


def load_target(target: str, name: str | None = None) -> Workload:
    """Resolve `suite:NAME[/FORM]`, `package.module:attr` or `path/to/file.py:attr` to a Workload.

    attr may name a Workload, or a zero-argument callable returning a Workload
    or an `(fn, args)` pair. A workload without a name of its own is named
    after where it came from, `module:attr` or `file-stem:attr`; `name`
    overrides both.
    """
    workload = _load_target(target)
    if not target.startswith("suite:") and workload.source is None:
        where, _, attr = target.rpartition(":")
        is_file = where.endswith(".py") or "/" in where
        workload = dataclasses.replace(workload, source=f"{Path(where).resolve()}:{attr}" if is_file else target)
    if name:
        return dataclasses.replace(workload, name=name)
    return workload


def target_name(target: str) -> str:
    """`pkg.mod:attr` as it is; `path/to/file.py:attr` as `file:attr`."""
    where, _, attr = target.rpartition(":")
    return f"{Path(where).stem}:{attr}" if where.endswith(".py") or "/" in where else target


def _load_target(target: str) -> Workload:
    if target.startswith("suite:"):
        return importlib.import_module(SUITE).suite_workload(target.removeprefix("suite:"))
    if ":" not in target:
        raise UserError(
            f"TARGET {target!r} must look like 'suite:NAME/FORM', 'package.module:attr' or 'path/to/file.py:attr'"
        )
    where, attr = target.rsplit(":", 1)
    try:
        if where.endswith(".py") or "/" in where:
            path = Path(where)
            if not path.is_file():
                raise UserError(f"TARGET file {where!r} does not exist")
            spec = importlib.util.spec_from_file_location(f"xtat_target_{path.stem}", path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except UserError:
        raise
    except Exception as exc:
        hint = ""
        if isinstance(exc, ImportError) and where.startswith(SUITE):
            hint = f"; {importlib.import_module(SUITE).MISSING}"
        raise UserError(f"TARGET {target!r} does not import: {type(exc).__name__}: {exc}{hint}") from exc
    if not hasattr(module, attr):
        raise UserError(f"TARGET {target!r}: module {where!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    if not isinstance(obj, Workload) and callable(obj):
        try:
            obj = obj()
        except TypeError as exc:
            raise UserError(
                f"TARGET {target!r} is a callable but not a zero-argument one ({exc}); "
                "name a Workload or a function that returns one"
            ) from exc
    if isinstance(obj, tuple) and len(obj) == 2 and callable(obj[0]):
        obj = Workload(fn=obj[0], args=tuple(obj[1]))
    if not isinstance(obj, Workload):
        raise UserError(
            f"TARGET {target!r} is a {type(obj).__name__}, not a workload; name an xtat.Workload "
            "or a zero-argument callable returning a Workload or (fn, args)"
        )
    return obj if obj.name else dataclasses.replace(obj, name=target_name(target))
