"""The program stage: decisions taken by rewriting the traced jaxpr.

    discover(fn, args, kwargs=None, *, max_barriers=16, knobs=None) -> list[Decision]
    rewrite(fn, decisions) -> Callable
    knob(name, choices, default) -> value

See `points.py` for the decision id format.
"""

from xtat.stages.program.knobs import knob
from xtat.stages.program.rewriting import STAGE, discover, rewrite

__all__ = ["STAGE", "discover", "knob", "rewrite"]
