"""Named dimensions of a workload's inputs, as Mesh-TensorFlow names them (batch, d_model, heads, ...).

A workload declares them beside its arguments: `Workload(fn, args, dims=...)`, where `dims` has the
shape of `args` down to where it names something, and holds `xtat.dims("batch", "length")` for an
array (one name per axis) or None for arrays it does not name. The sharding stage maps names to
mesh axes; it never reads the model code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax

from xtat.errors import UserError


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
