"""Started by `xtat run` and `xtat profile` (its folder first on PYTHONPATH): once the program
imports jax, apply the store's adopted compile options to every program this process compiles
(`xtat.apply.intercept`), or record them (`xtat.profile.recorder`).

Nothing is imported here but the standard library, and jax is not imported early: a script may set
its environment (JAX_PLATFORMS, XLA_FLAGS) before its own `import jax`. A sitecustomize that this
one shadows is found further down the path and run first, as if this file were not here.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import time
import types

_STARTED = time.perf_counter()  # about when this process started: its profile's whole time counts from here

_HERE = os.path.dirname(os.path.abspath(__file__))
_DB = "XTAT_RUN_DB"  # the store `xtat run` was given ("" for the default location)
_PROFILE = "XTAT_PROFILE_DIR"  # where `xtat profile` wants this process's record (a folder per process)
_HOT = "XTAT_PROFILE_HOT"  # the share of the time from which a program is kept for tuning
_KEEP = "XTAT_PROFILE_KEEP_BYTES"  # the most bytes of a program's inputs kept (above: their ranges)


def _run_the_shadowed_sitecustomize() -> None:
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


class _AfterJax(importlib.abc.MetaPathFinder):
    """Lets jax load as it would, then installs the interceptor: once."""

    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            load(module)
            try:
                if _PROFILE in os.environ:
                    from xtat.profile.recorder import install as record

                    folder = os.path.join(os.environ[_PROFILE], str(os.getpid()))
                    os.makedirs(folder, exist_ok=True)
                    record(folder, float(os.environ.get(_HOT, "0.05")), _STARTED,
                           int(os.environ[_KEEP]) if _KEEP in os.environ else None)
                else:
                    from xtat.apply.intercept import install

                    install(os.environ.get(_DB) or None)
            except Exception as exc:  # never the program's failure: it runs with XLA's defaults
                sys.stderr.write(f"xtat: nothing applied or recorded in this process ({type(exc).__name__}: {exc})\n")

        setattr(spec.loader, "exec_module", exec_module)  # noqa: B010  (a method of this loader alone replaced)
        return spec


_run_the_shadowed_sitecustomize()
if (_DB in os.environ or _PROFILE in os.environ) and "jax" not in sys.modules:
    sys.meta_path.insert(0, _AfterJax())
