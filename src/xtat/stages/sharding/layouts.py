"""Layouts: a mesh of devices with named axes, and which mesh axis each named dimension maps to.

Mesh-TensorFlow's model: a layout such as `batch:data, d_ff:model` over the mesh `data=2,model=2`
splits every array's batch axis over the mesh's `data` axis and its d_ff axis over `model`; names
without a rule are replicated. A layout is valid for a workload when every dimension it splits has
a size the mesh axis divides, and no array has two of its axes on one mesh axis.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xtat.capture.dimnames import MarkLayout, placed
from xtat.core.errors import UserError

AXES = ("data", "model")  # Mesh-TF's two mesh axes: rows (data parallel) and columns (model parallel)
NONE = "none"


@dataclass(frozen=True)
class Layout:
    mesh: tuple[tuple[str, int], ...]  # (axis, size), in AXES order, sizes > 1
    rules: tuple[tuple[str, str], ...]  # (dimension name, mesh axis), sorted by name

    @property
    def size(self) -> int:
        return math.prod(size for _, size in self.mesh)

    def axis_of(self, name: str) -> str | None:
        return dict(self.rules).get(name)

    def mesh_notation(self) -> str:
        return ",".join(f"{axis}={size}" for axis, size in self.mesh)

    def rules_notation(self) -> str:
        return ", ".join(f"{name}:{axis}" for name, axis in self.rules)

    def notation(self) -> str:
        """Mesh-TF's notation: `data=2,model=2; batch:data, d_ff:model` (no rules: `replicated`)."""
        return f"{self.mesh_notation()}; {self.rules_notation() or 'replicated'}"

    @classmethod
    def parse(cls, text: str) -> Layout:
        """The layout of `notation()`; a UserError naming what is wrong otherwise (stored text is untrusted)."""
        try:
            mesh_text, rules_text = (part.strip() for part in text.split(";"))
            mesh = tuple((axis, int(size)) for axis, size in (item.split("=") for item in mesh_text.split(",")))
            rules = () if rules_text == "replicated" else tuple(
                _rule(item) for item in rules_text.split(","))
        except ValueError:
            raise UserError(f"{text!r} is not a layout (`data=2,model=2; batch:data, d_ff:model`)") from None
        axes = [axis for axis, _ in mesh]
        if (axes != [a for a in AXES if a in axes] or any(size < 2 for _, size in mesh)
                or any(rule[1] not in axes for rule in rules)):
            raise UserError(f"{text!r}: mesh axes are {AXES} in order with sizes of at least 2, "
                            "and every rule names one of them")
        return cls(mesh, tuple(sorted(rules)))


def replicated(devices: int) -> Layout:
    return Layout((("data", devices),), ())


def meshes(devices: int) -> list[tuple[tuple[str, int], ...]]:
    """The factorisations of `devices` into the named axes: `data=N`, and `data=a,model=b` for a*b = N
    (a one-axis mesh is always `data`: `model=N` would be the same placements under another name)."""
    found: list[tuple[tuple[str, int], ...]] = [(("data", devices),)]
    for data in range(2, devices // 2 + 1):
        if devices % data == 0:
            found.append((("data", data), ("model", devices // data)))
    return found


def enumerate_layouts(leaves: Sequence[tuple[tuple[str, ...] | None, tuple[int, ...]]],
                      devices: int) -> list[Layout]:
    """Every valid layout of the named dimensions of `leaves` ((names or None, shape) per input array)
    on `devices` devices, the replicated one first. A layout that does not divide a dimension, or that
    puts two axes of one array on one mesh axis, is not offered."""
    sizes: dict[str, set[int]] = {}
    named = [names for names, _ in leaves if names]
    for names, shape in leaves:
        for name, size in zip(names or (), shape):
            if name:  # "" names an axis nothing maps
                sizes.setdefault(name, set()).add(size)
    dimension_names = sorted(sizes)
    found = [replicated(devices)]
    for mesh in meshes(devices):
        axis_size = dict(mesh)
        options = [[NONE] + [axis for axis in axis_size if all(s % axis_size[axis] == 0 for s in sizes[name])]
                   for name in dimension_names]
        for choice in itertools.product(*options):
            rules = tuple((name, axis) for name, axis in zip(dimension_names, choice) if axis != NONE)
            if not rules:
                continue
            mapping = dict(rules)
            if any(_clashes(array, mapping) for array in named):
                continue
            found.append(Layout(mesh, rules))
    return found


def _clashes(array: tuple[str, ...], mapping: dict[str, str]) -> bool:
    used = [mapping[name] for name in array if name and name in mapping]
    return len(used) != len(set(used))


def partition_spec(layout: Layout, names: tuple[str, ...] | None) -> tuple[str | None, ...]:
    """One array's PartitionSpec entries under `layout` (an unnamed array is replicated)."""
    return tuple(layout.axis_of(name) for name in names) if names else ()


def mesh_of(layout: Layout, devices: Sequence | None = None) -> Any:
    """`layout`'s `jax.sharding.Mesh` over the first `layout.size` devices (this process's by default)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    available = list(jax.devices() if devices is None else devices)
    if len(available) < layout.size:
        raise UserError(f"layout {layout.notation()!r} needs {layout.size} devices; this process has "
                        f"{len(available)}")
    return Mesh(np.array(available[: layout.size]).reshape([size for _, size in layout.mesh]),
                tuple(axis for axis, _ in layout.mesh))


def shardings(layout: Layout, leaf_names: Sequence[tuple[str, ...] | None], devices: Sequence | None = None) -> list:
    """A `NamedSharding` per input array: `layout`'s mesh over the first `layout.size` devices."""
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = mesh_of(layout, devices)
    return [NamedSharding(mesh, PartitionSpec(*partition_spec(layout, names))) for names in leaf_names]


def in_placement(fn: Callable, layout: Layout, devices: Sequence | None = None) -> Callable:
    """`fn`, with the intermediates it marks (`xtat.constrain`) laid out by `layout` on its mesh
    whenever jax traces it."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = mesh_of(layout, devices)
    placement = MarkLayout(lambda x, names: jax.lax.with_sharding_constraint(
        x, NamedSharding(mesh, PartitionSpec(*partition_spec(layout, names)))))

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        with placed(placement):
            return fn(*args, **kwargs)

    return traced


def _rule(item: str) -> tuple[str, str]:
    """`batch:data` as (dimension name, mesh axis); ValueError when it is not one."""
    name, axis = item.strip().split(":")  # ValueError unless exactly two parts
    return name, axis
