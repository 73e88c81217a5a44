"""xtat: an autotuner for the XLA compiler as used through JAX."""

from xtat.workload import Workload

__all__ = ["Workload", "tune", "jit"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy so that `import xtat` stays cheap for worker processes and the CLI.
    if name == "tune":
        from xtat.tuner import tune

        return tune
    if name == "jit":
        from xtat.apply.jit import jit

        return jit
    raise AttributeError(name)
