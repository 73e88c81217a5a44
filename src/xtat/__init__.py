"""xtat: an autotuner for the XLA compiler as used through JAX."""

from xtat.workload import Workload

__all__ = ["Workload", "tune", "jit", "knob"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy so that `import xtat` stays cheap for worker processes and the CLI.
    if name == "tune":
        from xtat.tuner import tune

        return tune
    if name == "knob":
        from xtat.stages.program.knobs import knob

        return knob
    if name == "jit":
        from xtat.apply.jit import jit

        return jit
    raise AttributeError(name)
