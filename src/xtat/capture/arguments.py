"""A call's arguments as jax.jit sees them, and as a worker process receives them.

jax.jit splits a call into static values (hashed, baked into the program)
and dynamic pytree leaves (traced). `Statics` makes that split the way jax
does, for `Workload` and `xtat.jit` alike, so a tuned program and a deployed
one are keyed on the same lowering.

A worker gets no Python objects: only the dynamic leaves, as plain numpy
arrays. Typed PRNG keys travel as their key data and are wrapped again inside
the exported program; Python scalars travel as the weakly typed arrays jax.jit
makes of them. Anything else gets an error naming the leaf's path.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from xtat.core.errors import UserError

_PYTHON_SCALARS = (bool, int, float, complex)


@dataclass(frozen=True)
class Statics:
    """Which arguments jax.jit treats as static, in either call style."""

    numbers: tuple[int, ...] = ()
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, fn: Callable, static_argnums: Any, static_argnames: Any) -> Statics:
        numbers = _as_tuple(static_argnums)
        names = _as_tuple(static_argnames)
        try:
            parameters = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        positional = [p.name for p in parameters if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
        # As jax does: numbers name their parameters, names number theirs, when only one is given.
        if static_argnums is not None and static_argnames is None:
            names = tuple(positional[i] for i in numbers if -len(positional) <= i < len(positional))
        elif static_argnames is not None and static_argnums is None:
            numbers = tuple(i for i, name in enumerate(positional) if name in names)
        return cls(tuple(numbers), frozenset(names))

    def positions(self, count: int) -> frozenset[int]:
        return frozenset(n + count if n < 0 else n for n in self.numbers)

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, tuple[tuple, dict]]:
        """(static values, dynamic (args, kwargs)) as jax.jit separates them."""
        positions = self.positions(len(args))
        static = tuple((i, a) for i, a in enumerate(args) if i in positions)
        static += tuple(sorted((k, v) for k, v in kwargs.items() if k in self.names))
        dynamic = (tuple(a for i, a in enumerate(args) if i not in positions),
                   {k: v for k, v in kwargs.items() if k not in self.names})
        return static, dynamic

    def bind(self, fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, tuple, dict]:
        """fn as a function of the dynamic arguments alone, the static values closed over,
        with those dynamic arguments: what the tuner traces, rewrites and exports."""
        static, (dynamic_args, dynamic_kwargs) = self.split(args, kwargs)
        if not static:
            return fn, args, kwargs
        positional = sorted((i, v) for i, v in static if isinstance(i, int))
        keywords = {k: v for k, v in static if isinstance(k, str)}

        @functools.wraps(fn)
        def bound(*dynamic: Any, **dynamic_kw: Any) -> Any:
            full = list(dynamic)
            for i, value in positional:  # ascending, so each lands at its own position
                full.insert(i, value)
            return fn(*full, **dynamic_kw, **keywords)

        return bound, dynamic_args, dynamic_kwargs


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, (int, str)) else tuple(value)


JIT_ARGUMENT_OPTIONS = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames")


@dataclass(frozen=True)
class Unwrapped:
    """What a jit wrapper wraps, and how it splits a call."""

    fn: Callable
    options: dict[str, Any]  # jax.jit's argument options it was wrapped with
    filtered: bool = False  # equinox.filter_jit: every leaf that is not an array is static


def unwrap_jit(fn: Callable) -> Unwrapped:
    """The function inside a `jax.jit` or `equinox.filter_jit` wrapper, and how that wrapper split calls.

    Tuning or re-jitting the wrapper itself would nest one jit inside another
    (a different program, and a static argument would become a tracer), so the
    wrapped function is taken with its static and donated arguments. A function
    that is no such wrapper comes back as it is.
    """
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is None or not callable(wrapped):
        return Unwrapped(fn, {})
    info = getattr(fn, "_jit_info", None)  # jax's own record of the jit's arguments (private, so guarded)
    if info is not None:
        options = {name: getattr(info, name, None) for name in JIT_ARGUMENT_OPTIONS}
        return Unwrapped(wrapped, {name: tuple(value) for name, value in options.items() if value})
    kind = type(fn)
    if kind.__module__.startswith("equinox") and kind.__name__ == "_JitWrapper":
        return Unwrapped(wrapped, {}, filtered=True)
    if kind.__module__.startswith("flax.nnx"):
        raise UserError(
            f"{getattr(fn, '__name__', 'this function')} is wrapped by flax.nnx.jit, which writes module "
            "updates back into the Python objects it was given; a compiled program cannot. Tune and deploy "
            "its functional form: graphdef, state = nnx.split(model); def step(state, ...): model = "
            "nnx.merge(graphdef, state); ...; return nnx.state(model), ... (see examples/flax_nnx.py)"
        )
    return Unwrapped(fn, {})


# ---------------------------------------------------------------- equinox-style filtering


def is_array(leaf: Any) -> bool:
    """What `equinox.is_array` calls an array: everything else is static under filter_jit."""
    return isinstance(leaf, (jax.Array, np.ndarray, np.generic))


@dataclass(frozen=True)
class FilteredStatic:
    """The static part of a filtered call: its tree, and its non-array leaves (None for an array's place)."""

    tree: Any
    leaves: tuple


class _StaticOutput:
    """A pytree node with no children: carries an output's non-array part through jax.jit."""

    def __init__(self, value: Any):
        self.value = value


jax.tree_util.register_pytree_node(_StaticOutput, lambda s: ((), s.value), lambda value, _: _StaticOutput(value))


def partition(args: tuple, kwargs: dict) -> tuple[list, FilteredStatic]:
    """(the array leaves, the static rest) of a call, as equinox.filter_jit splits it."""
    leaves, tree = jax.tree.flatten((args, kwargs))
    return ([leaf for leaf in leaves if is_array(leaf)],
            FilteredStatic(tree, tuple(None if is_array(leaf) else leaf for leaf in leaves)))


def combine(dynamic: list, static: FilteredStatic) -> Any:
    arrays = iter(dynamic)
    return jax.tree.unflatten(static.tree, [next(arrays) if leaf is None else leaf for leaf in static.leaves])


def filtered_call(fn: Callable) -> Callable:
    """fn as `(array leaves, static rest) -> (output arrays, static output)`: jittable with
    static_argnums=1 however many non-array leaves fn takes and returns."""

    def call(dynamic: list, static: FilteredStatic) -> tuple:
        args, kwargs = combine(dynamic, static)
        out_leaves, out_tree = jax.tree.flatten(fn(*args, **kwargs))
        return ([leaf for leaf in out_leaves if is_array(leaf)],
                _StaticOutput(FilteredStatic(out_tree, tuple(None if is_array(x) else x for x in out_leaves))))

    # Named after fn, but not wrapping it: jax checks static_argnums against the signature it unwraps to.
    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "call")
    call.__doc__ = getattr(fn, "__doc__", None)
    return call


def filtered_result(out: tuple) -> Any:
    """The user's output from `filtered_call`'s."""
    dynamic, static = out
    return combine(dynamic, static.value)


# ---------------------------------------------------------------- leaves sent to workers


@dataclass(frozen=True)
class InputLeaf:
    """One dynamic leaf of a call, as a worker receives it."""

    path: str  # e.g. args[0]['params']['w']
    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool  # a Python scalar: jax.jit traces it weakly typed
    key_impl: Any = None  # the jax.random implementation of a typed key; its data travels

    @property
    def spec(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(self.shape, self.dtype, weak_type=self.weak_type)


def is_typed_key(leaf: Any) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def path_name(path: tuple) -> str:
    """'args[0]['w']' for a leaf of (args, kwargs); 'kwargs['n']' for a keyword argument."""
    if not path:
        return "args"
    head = "args" if getattr(path[0], "idx", None) == 0 else "kwargs"
    return head + jax.tree_util.keystr(tuple(path[1:]))


def input_leaves(args: tuple, kwargs: dict, what: str) -> tuple[list[InputLeaf], list[np.ndarray]]:
    """The dynamic leaves of (args, kwargs) and the host arrays a worker gets for them."""
    leaves: list[InputLeaf] = []
    arrays: list[np.ndarray] = []
    for path, leaf in jax.tree_util.tree_flatten_with_path((args, kwargs))[0]:
        name = path_name(path)
        key_impl = None
        if is_typed_key(leaf):
            key_impl = jax.random.key_impl(leaf)
            array = np.asarray(jax.random.key_data(leaf))
            weak = False
        elif isinstance(leaf, _PYTHON_SCALARS):
            aval = jax.typeof(leaf)
            array, weak = np.asarray(leaf, dtype=aval.dtype), True
        elif isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            array = np.asarray(leaf)
            weak = bool(getattr(jax.typeof(leaf), "weak_type", False)) if isinstance(leaf, jax.Array) else False
        else:
            raise UserError(
                f"{what}: {name} is a {type(leaf).__name__}, which jax.jit cannot trace as an array. "
                "Make it static: pass static_argnums=/static_argnames= for a whole argument, mark the field "
                "static (flax.struct.field(pytree_node=False), equinox.field(static=True)), or wrap the "
                "function in equinox.filter_jit, which makes every non-array leaf static"
            )
        if array.dtype == object:
            raise UserError(f"{what}: {name} is not an array of numbers ({type(leaf).__name__})")
        leaves.append(InputLeaf(name, tuple(array.shape), array.dtype, weak, key_impl))
        arrays.append(array)
    return leaves, arrays


def as_leaves(arrays: Sequence[Any], leaves: list[InputLeaf]) -> list:
    """The values jax.jit was given for the flat input arrays: typed keys wrapped again (a worker
    receives their key data)."""
    return [x if leaf.key_impl is None else jax.random.wrap_key_data(x, impl=leaf.key_impl)
            for x, leaf in zip(arrays, leaves, strict=True)]


def flat_function(fn: Callable, args: tuple, kwargs: dict,
                  leaves: list[InputLeaf] | None = None) -> tuple[Callable, list[jax.ShapeDtypeStruct]]:
    """fn as a function of the flat host arrays of its dynamic leaves, returning flat output
    leaves (typed keys as their key data), and the specs of those arrays.

    Flat so that custom pytree nodes (optimizer states, dataclasses) need no
    serialization of their own; workers feed the same arrays to every program.
    """
    if leaves is None:  # described already by a caller that has them (no second host copy)
        leaves, _ = input_leaves(args, kwargs, "args")
    in_tree = jax.tree.structure((args, kwargs))

    def flat(*arrays: Any) -> list:
        a, kw = jax.tree.unflatten(in_tree, as_leaves(arrays, leaves))
        return [jax.random.key_data(o) if is_typed_key(o) else o for o in jax.tree.leaves(fn(*a, **kw))]

    return flat, [leaf.spec for leaf in leaves]


def export_flat(fn: Callable, args: tuple, kwargs: dict, leaves: list[InputLeaf] | None = None,
                in_shardings: list | None = None) -> bytes:
    """The `jax.export` serialization of `flat_function(fn, args, kwargs)` (for a layout: over its mesh,
    one sharding per flat input)."""
    flat, specs = flat_function(fn, args, kwargs, leaves)
    jitted = jax.jit(flat) if in_shardings is None else jax.jit(flat, in_shardings=tuple(in_shardings))
    return bytes(jax.export.export(jitted)(*specs).serialize())
