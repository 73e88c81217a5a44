"""`xtat.jit`: `jax.jit` that compiles each input signature with its adopted config.

Each config in use (XLA's defaults included) gets one `jax.jit` of the
function, its program rewrites applied at trace time and its compile
options passed as `compiler_options`. Once every signature seen so far
shares one config, calling the `xtat.jit` object *is* calling that
`jax.jit` object: the call slot of the object's own class points at it, so
steady-state calls take jax's C++ dispatch with no Python frame of ours.

A signature is resolved once, when jax traces it (or on the first call):
lower as `jax.jit` would, fingerprint, look up the store. A new signature
traced by the active `jax.jit` whose config differs is traced with its own
rewrites, and later calls go through a Python router that picks the
`jax.jit` of each signature's config (one dictionary lookup and a pytree
flatten per call). That one first call compiles with the active config's
compile options, the options adopted for another signature of the same
function.

Anything that goes wrong on the way (no database, a stale or foreign record,
an option this XLA rejects, a rewrite that no longer applies) falls back to
XLA's defaults with one warning; errors of the user's own function are
raised exactly as `jax.jit` raises them. Inside an outer trace (jit, grad,
scan) the rewrites apply and the compile options are the outer program's:
see `nesting.py`.
"""

from __future__ import annotations

import functools
import threading
import types
import warnings
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import jax
from jax._src import core

from xtat.apply import nesting
from xtat.apply.lookup import Found, Lookup, lookup, mark_rejected
from xtat.capture.arguments import Statics, filtered_call, filtered_result, partition, unwrap_jit
from xtat.capture.workload import Identity
from xtat.core.errors import UserError


def _aval(leaf: Any) -> Hashable:
    aval = jax.typeof(leaf)
    return tuple(aval.shape), aval.dtype, getattr(aval, "weak_type", False)


class _CallState(threading.local):
    """Per thread: the config whose program the wrapper last traced to completion."""

    traced: str | None = None


class Jitted:
    """Callable like `jax.jit(fn, **jit_kwargs)`, with the adopted config of each signature.

    Every instance has a class of its own so that its call slot can point
    straight at a `jax.jit` object (see the module docstring).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Jitted:
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        return super().__new__(own)

    def __init__(self, fn: Callable, db: str | Path | None, jit_kwargs: dict):
        # A jax.jit wrapper is unwrapped, its argument options kept, as `Workload` does:
        # both then lower the same program.
        unwrapped = unwrap_jit(fn)
        fn, jit_kwargs = unwrapped.fn, {**unwrapped.options, **jit_kwargs}
        self._fn = fn
        self._db = db
        self._user_options: dict[str, Any] = dict(jit_kwargs.pop("compiler_options", None) or {})
        self._jit_kwargs = jit_kwargs
        # Exactly what the user's jax.jit would be: the fingerprint is taken on its lowering,
        # and its construction raises what jax.jit raises for bad keywords.
        self._default: Any = jax.jit(fn, **jit_kwargs, compiler_options=self._user_options or None)
        self._statics = Statics.of(fn, jit_kwargs.get("static_argnums"), jit_kwargs.get("static_argnames"))
        self._routes: dict[Hashable, Lookup] = {}
        self._staged: dict[Hashable, Any] = {}  # signature -> jax.stages.Traced of the function, traced once
        self._entries: dict[str, Any] = {}  # config key -> jax.jit object
        self._lock = threading.RLock()
        self._state = _CallState()
        self._warned: set[str] = set()
        functools.update_wrapper(self, fn)
        self._install(self._route_call)

    # ---------------------------------------------------------------- dispatch

    def _install(self, target: Callable) -> None:
        type(self).__call__ = staticmethod(target)  # type: ignore[method-assign]  # the call slot, set per instance class on purpose

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per instance by _install
        return self._route_call(*args, **kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def _route_call(self, *args: Any, **kwargs: Any) -> Any:
        """The Python path: first calls, and functions whose signatures use several configs."""
        key = self._hashable_key(args, kwargs)
        if key is None:  # arguments jax.jit refuses: let it say so, in its words
            return self._default(*args, **kwargs)
        route = self._route(key, args, kwargs)
        self._state.traced = None
        try:
            out = self._deployed(route)(*args, **kwargs)
        except Exception as exc:
            if self._state.traced != route.config or not (route.options or route.candidate.program
                                                          or route.candidate.layout):
                raise  # the user's function (or jax's argument checks) failed: as jax.jit would
            self._state.traced = None
            route = self._reject(key, route, exc)
            out = self._entry(route)(*args, **kwargs)
        with self._lock:
            configs = {r.config for r in self._routes.values()}
            if len(configs) == 1:
                self._install(self._deployed(route))
        return out

    def _deployed(self, route: Lookup) -> Callable:
        """What a call of this route goes through: its entry, placing the inputs first for a layout."""
        return self._entry(route) if route.shardings is None else self._placing(route)

    def _placing(self, route: Lookup) -> Callable:
        """The entry of an adopted layout: the dynamic inputs placed on its mesh first (a no-op for
        arrays already there, such as the state the previous call returned), so XLA partitions the
        program over the mesh as the tuner measured it."""
        entry, shardings, statics = self._entry(route), route.shardings or [], self._statics

        def call(*args: Any, **kwargs: Any) -> Any:
            positions = statics.positions(len(args))
            dynamic = [i for i in range(len(args)) if i not in positions]
            names = [k for k in kwargs if k not in statics.names]
            leaves, tree = jax.tree.flatten(([args[i] for i in dynamic], {k: kwargs[k] for k in names}))
            if len(leaves) != len(shardings) or any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
                return entry(*args, **kwargs)  # inside another trace: the outer computation places its values
            placed_args, placed_kwargs = jax.tree.unflatten(tree, [jax.device_put(leaf, sharding) for leaf, sharding
                                                                   in zip(leaves, shardings, strict=True)])
            full = list(args)
            for i, value in zip(dynamic, placed_args, strict=True):
                full[i] = value
            return entry(*full, **{**kwargs, **placed_kwargs})

        return call

    def _key(self, args: tuple, kwargs: dict) -> Hashable:
        """The signature as jax.jit keys it: static values, then the dynamic tree and avals."""
        static, dynamic = self._statics.split(args, kwargs)
        leaves, tree = jax.tree.flatten(dynamic)
        return tree, tuple(map(_aval, leaves)), static

    def _hashable_key(self, args: tuple, kwargs: dict) -> Hashable | None:
        """The signature, or None for arguments jax.jit itself refuses (unhashable statics, non-arrays)."""
        try:
            key = self._key(args, kwargs)
            hash(key)
        except Exception:
            return None
        return key

    def _route(self, key: Hashable, args: tuple, kwargs: dict) -> Lookup:
        route = self._routes.get(key)
        if route is None:
            with self._lock:
                route = self._routes.get(key) or self._resolve(key, args, kwargs)
        return route

    def _resolve(self, key: Hashable, args: tuple, kwargs: dict) -> Lookup:
        # Tracers of an outer trace (grad, vmap, an outer jit) stand for their abstract values here.
        staged = self._default.trace(*args, **kwargs)
        found = lookup(Identity.of(staged.lower()), self._db)
        self._staged[key] = staged
        if found.found is Found.ADOPTED:
            mismatch = found.candidate.process.mismatch(jax.local_device_count("cpu"))
            if mismatch:
                self._warn(mismatch)
            try:
                found.shardings  # noqa: B018  (a layout this process has too few devices for)
            except UserError as exc:
                self._warn(f"{exc}: compiling with XLA defaults on one device (on CPU start the process with "
                           "XLA_FLAGS=--xla_force_host_platform_device_count, as it was tuned)")
                found = Lookup(Found.REJECTED, str(exc), found.result_id)
        elif found.found is not Found.NOT_ADOPTED:
            self._warn(f"compiling with XLA defaults ({found.reason})")
            if found.found is Found.REJECTED:
                mark_rejected(self._db, found.result_id, found.reason)
        self._routes[key] = found
        return found

    def _reject(self, key: Hashable, route: Lookup, exc: Exception) -> Lookup:
        """The adopted config failed to apply here: defaults from now on, marked on the record."""
        reason = f"{type(exc).__name__}: {exc}"
        self._warn(f"adopted config {route.candidate} not applicable here ({reason[:300]}); compiling with defaults")
        mark_rejected(self._db, route.result_id, reason)
        rejected = Lookup(Found.REJECTED, reason, route.result_id)
        with self._lock:
            self._routes[key] = rejected
        return rejected

    def _entry(self, route: Lookup) -> Any:
        """The jax.jit object of a config: its rewrites at trace time, its options at compile time."""
        config = route.config
        entry = self._entries.get(config)
        if entry is not None:
            return entry
        with self._lock:
            if config in self._entries:
                return self._entries[config]
            options = {**self._user_options, **route.options}
            with warnings.catch_warnings():  # jax.jit's warnings about these keywords were given once already
                warnings.simplefilter("ignore")
                entry = jax.jit(self._wrapper(route), **self._jit_kwargs, compiler_options=options or None)
            if route.options and not nesting.register(self, entry):
                entry = self._python_entry(entry, self._wrapper(route))
            self._entries[config] = entry
            return entry

    def _python_entry(self, entry: Any, wrapper: Callable) -> Any:
        """Where this jax cannot let an optioned jit nest: retry a nested call without the options."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = jax.jit(wrapper, **self._jit_kwargs, compiler_options=self._user_options or None)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return entry(*args, **kwargs)
            except ValueError as exc:
                if "top-level" not in str(exc):
                    raise
                return plain(*args, **kwargs)

        for name in ("lower", "trace", "eval_shape", "clear_cache", "_cache_size"):
            setattr(call, name, getattr(entry, name))
        return call

    def _wrapper(self, route: Lookup) -> Callable:
        """What jax traces for a config: the signature's own program, rewritten as its config says."""
        config = route.config

        @functools.wraps(self._fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            key = self._key(args, kwargs)
            own = self._route(key, args, kwargs)
            if own.config != config:
                # A new signature reached the active jit: trace its own program, route later calls.
                self._install(self._route_call)
            out = self._program(own, key, args, kwargs)
            self._state.traced = own.config
            return out

        return traced

    def _program(self, route: Lookup, key: Hashable, args: tuple, kwargs: dict) -> Any:
        """The signature's program on the caller's trace: rewritten and laid out (marked intermediates), or
        the jaxpr resolution traced."""
        program, layout = route.candidate.program, route.candidate.layout
        if program or layout:
            from xtat.stages.program import rewrite
            from xtat.stages.sharding.layouts import Layout, in_placement

            def traced_by_the_rewriter(*a: Any, **k: Any) -> Any:
                out = self._fn(*a, **k)
                # The user's function went through: an error after this is the config's.
                self._state.traced = route.config
                return out

            fn: Callable = functools.wraps(self._fn)(traced_by_the_rewriter)
            fn = rewrite(fn, program) if program else fn
            fn = in_placement(fn, Layout.parse(layout)) if layout else fn
            return fn(*args, **kwargs)
        staged = self._staged.get(key)
        leaves = jax.tree.leaves(self._statics.split(args, kwargs)[1])
        if staged is None or len(leaves) != len(staged.jaxpr.in_avals):
            return self._fn(*args, **kwargs)
        # Re-emit the jaxpr traced for the fingerprint rather than run the user's function a second time.
        return jax.tree.unflatten(staged.out_tree, core.jaxpr_as_fun(staged.jaxpr)(*leaves))

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(f"xtat.jit({getattr(self._fn, '__name__', 'fn')}): {message}", stacklevel=4)

    # ---------------------------------------------------------------- jax.jit's staged API

    def _entry_for(self, args: tuple, kwargs: dict) -> Any:
        key = self._hashable_key(args, kwargs)
        return self._default if key is None else self._entry(self._route(key, args, kwargs))

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """jax.jit's `lower`: the tuned program; `.compile()` applies the tuned options."""
        return self._entry_for(args, kwargs).lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._entry_for(args, kwargs).trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        return self._default.eval_shape(*args, **kwargs)

    def clear_cache(self) -> None:
        """Forget compiled executables and what the store said: the next call looks again."""
        with self._lock:
            for entry in self._entries.values():
                entry.clear_cache()
            self._default.clear_cache()
            self._entries.clear()
            self._routes.clear()
            self._staged.clear()
            self._install(self._route_call)

    def lookups(self) -> list[Lookup]:
        """What the store said for each signature resolved so far."""
        return list(self._routes.values())


class FilteredJitted:
    """`xtat.jit` of an `equinox.filter_jit` function: each call is split as filter_jit splits it
    (arrays traced, every other leaf static) and goes to a `Jitted` of the split function, which is
    what `xtat.Workload` tunes for such a function."""

    def __init__(self, fn: Callable, db: str | Path | None, jit_kwargs: dict):
        self._inner = Jitted(filtered_call(fn), db, {**jit_kwargs, "static_argnums": (1,)})
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return filtered_result(self._inner(*partition(args, kwargs)))

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.lower(*partition(args, kwargs))

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.trace(*partition(args, kwargs))

    def clear_cache(self) -> None:
        self._inner.clear_cache()

    def lookups(self) -> list[Lookup]:
        return self._inner.lookups()


def jit(fn: Callable | None = None, *, db: str | Path | None = None, **jit_kwargs: Any) -> Any:
    """Drop-in for `jax.jit(fn, **jit_kwargs)` that applies the adopted config from `db`.

    Usable as `xtat.jit(fn)`, `@xtat.jit` or `@xtat.jit(db=..., static_argnums=...)`. A function
    already wrapped by `jax.jit` keeps its static and donated arguments; one wrapped by
    `equinox.filter_jit` keeps its way of splitting calls.
    """
    if fn is None:
        return functools.partial(jit, db=db, **jit_kwargs)
    unwrapped = unwrap_jit(fn)
    if unwrapped.filtered:
        return FilteredJitted(unwrapped.fn, db, dict(jit_kwargs))
    return Jitted(fn, db, dict(jit_kwargs))
