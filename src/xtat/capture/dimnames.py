"""Named dimensions of a workload's arrays, as Mesh-TensorFlow names them (batch, d_model, heads, ...).

A workload declares its inputs' beside its arguments: `Workload(fn, args, dims=...)`, where `dims`
has the shape of `args` down to where it names something, and holds `xtat.dims("batch", "length")`
for an array (one name per axis) or None for arrays it does not name. The sharding stage maps names
to mesh axes; it never reads the model code.

Intermediates are marked in the model code: `xtat.constrain(h, "batch", None, "d_ff")`. A layout
places the inputs and XLA's SPMD partitioner chooses how every intermediate is split, sometimes
badly (an activation gathered whole before a matmul that could have stayed split); a mark lays the
intermediate out as the layout lays out those names, with `jax.lax.with_sharding_constraint`.
Outside a placement (plain `jax.jit`) `constrain` returns its argument, so marked code runs as it
did. The tuner traces the workload once recording the marks (their names and sizes join the inputs'
when layouts are enumerated) and, when there are marks, exports one program per layout, traced in
its placement; `xtat.jit` traces an adopted layout's program in its placement. As with `xtat.knob`,
a mark inside a function jax caches on its own (a module-level `jax.jit`-decorated helper) is read
on that function's first trace only: mark in code that is traced afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import jax

from xtat.core.errors import UserError


@dataclass(frozen=True)
class Dims:
    """The names of one array's axes, in order ("" for an axis no layout splits)."""

    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not all(isinstance(n, str) for n in self.names):
            raise UserError(f"xtat.dims takes one name (or None) per axis, got {self.names!r}")


def dims(*names: str | None) -> Dims:
    """`xtat.dims("batch", "d_model")`: the names of an array's axes, for `Workload(dims=...)`; None for
    an axis that no layout may split (a sequence length, a head's width)."""
    return Dims(tuple(name or "" for name in names))


def _is_declaration(x: Any) -> bool:
    return x is None or isinstance(x, Dims)


def leaf_dims(declared: Any, args: tuple) -> list[tuple[str, ...] | None]:
    """Each array leaf of `args` (in `jax.tree.leaves` order) with its declared names, or None.

    `declared` is a prefix of `args`' structure: None (or a missing declaration) leaves a whole
    subtree unnamed. A name count that differs from an array's rank is a UserError."""
    if declared is None:
        return [None] * len(jax.tree.leaves(args))
    try:
        per_subtree = jax.tree.map(lambda d, subtree: [d.names if d else None] * len(jax.tree.leaves(subtree)),
                                   declared, args, is_leaf=_is_declaration)
    except ValueError as exc:
        raise UserError(f"Workload dims must have the structure of args (a prefix of it): {exc}") from None
    flat = [names for group in jax.tree.leaves(per_subtree, is_leaf=lambda x: isinstance(x, list))
            for names in group]
    for names, leaf in zip(flat, jax.tree.leaves(args), strict=True):
        shape = getattr(leaf, "shape", ())
        if names is not None and len(names) != len(shape):
            raise UserError(f"dims {names} name {len(names)} axes of an array of shape {tuple(shape)}")
    return flat


Mark = tuple[tuple[str, ...], tuple[int, ...]]  # an intermediate's dimension names and shape


@dataclass
class MarkLayout:
    """Per-trace state: how marks are laid out (`lay_out(x, names)`; None: they are only recorded), and
    the marks seen. Mutable on purpose, but reachable only through `_PLACEMENT` during one trace."""

    lay_out: Callable[[Any, tuple[str, ...]], Any] | None = None
    seen: list[Mark] = field(default_factory=list)


# The one piece of module state: the placement (if any) that the current trace runs in.
_PLACEMENT: ContextVar[MarkLayout | None] = ContextVar("xtat_placement", default=None)


@contextmanager
def placed(placement: MarkLayout) -> Iterator[MarkLayout]:
    """Trace inside this for `constrain` to record into (or lay out by) `placement`."""
    token = _PLACEMENT.set(placement)
    try:
        yield placement
    finally:
        _PLACEMENT.reset(token)


def marks_of(fn: Callable, *args: Any, **kwargs: Any) -> list[Mark]:
    """The marks that one abstract trace of `fn(*args, **kwargs)` meets, in order."""

    def traced_afresh(*a: Any, **k: Any) -> Any:  # a new function, so no cached trace stands in for it
        return fn(*a, **k)

    with placed(MarkLayout()) as placement:
        jax.eval_shape(traced_afresh, *args, **kwargs)
    return placement.seen


def constrain(x: Any, *names: str | None) -> Any:
    """`x`, laid out as the layout being tuned or applied lays out these dimension names (one per axis, as
    in `xtat.dims`; None for an axis no layout splits); `x` itself outside a placement."""
    declared = dims(*names)
    shape = tuple(getattr(x, "shape", ()))
    if len(declared.names) != len(shape):
        raise UserError(f"xtat.constrain names {len(names)} axes of an array of shape {shape}; "
                        "give one name (or None) per axis")
    placement = _PLACEMENT.get()
    if placement is None:
        return x
    if placement.lay_out is None:
        placement.seen.append((declared.names, shape))
        return x
    return placement.lay_out(x, declared.names)
