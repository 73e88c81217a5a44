"""`xtat.jit`: a drop-in for `jax.jit` that compiles with the adopted config.

On the first call for an input signature it lowers the function as
`jax.jit` would, looks the fingerprint up in the store and compiles with the
adopted compile options. Anything that goes wrong on the way (no database, a
stale or foreign record, an option this XLA rejects) falls back to the
default compile with one warning: it never fails where `jax.jit` succeeds.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax

from xtat.errors import StoreError
from xtat.stages.base import Candidate
from xtat.store.sqlite import Store, default_path
from xtat.workload import Identity


@dataclass(frozen=True)
class Lookup:
    """What the store says for one lowered program."""

    options: dict[str, object]
    reason: str  # "adopted" | "not adopted" | "no record" | "stale" | "no database" | "unreadable"
    result_id: int | None = None
    candidate: Candidate = Candidate()  # every stage's part of the adopted config


def lookup(identity: Identity, db: str | Path | None) -> Lookup:
    path = Path(db) if db is not None else default_path()
    if not path.exists():
        return Lookup({}, "no database")
    try:
        store = Store.open(path, read_only=True)
    except StoreError as exc:
        return Lookup({}, f"unreadable: {exc}")
    try:
        if store.is_new():
            return Lookup({}, "no database")
        record = store.workload(identity.fingerprint)
        if record is None:
            others = store.workloads_of_program(identity.program)
            if others:
                env = others[-1].env
                return Lookup({}, f"stale: tuned under {env}, running under {identity.env}")
            return Lookup({}, "no record")
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            return Lookup({}, "not adopted")
        candidate = deployment(result.config)
        return Lookup(candidate.compile_options, "adopted", result.id, candidate)
    except Exception as exc:  # a damaged file must not break the caller
        return Lookup({}, f"unreadable: {exc}")
    finally:
        store.close()


def deployment(config: dict) -> Candidate:
    """What an adopted config asks of production: rewrites, compile options, environment."""
    from xtat.stages.base import concretize
    from xtat.tuner import make_stages

    return concretize(make_stages(), config)


def runtime_mismatch(candidate: Candidate) -> str | None:
    """How this process differs from the tuned runtime environment, if it does."""
    import os

    import jax

    from xtat.stages.runtime import ENV_CPUS, ENV_HOST_DEVICES, HOST_DEVICES_FLAG

    env = dict(candidate.env)
    differences = []
    cpus = env.get(ENV_CPUS)
    if cpus is not None and len(cpus.split(",")) != len(os.sched_getaffinity(0)):
        differences.append(f"tuned with {len(cpus.split(','))} CPU(s), this process has "
                           f"{len(os.sched_getaffinity(0))}: start it under `taskset -c {cpus}`")
    devices = env.get(ENV_HOST_DEVICES)
    if devices is not None and int(devices) != jax.local_device_count("cpu"):
        differences.append(f"tuned with {devices} host device(s), this process has "
                           f"{jax.local_device_count('cpu')}: set XLA_FLAGS={HOST_DEVICES_FLAG}={devices}")
    return "; ".join(differences) or None


def _mark_rejected(db: str | Path | None, result_id: int | None, reason: str) -> None:
    """Best effort: record on the result row that this XLA rejected it; never fails the caller."""
    if result_id is None:
        return
    try:
        from xtat.workload import environment_identity

        store = Store.open(Path(db) if db is not None else default_path())
        try:
            store.mark_rejected(result_id, reason, environment_identity())
        finally:
            store.close()
    except Exception:  # a read-only or busy database: the warning already told the user
        pass


class _Jitted:
    """Callable like the result of `jax.jit(fn)`, with one executable per signature."""

    def __init__(self, fn: Callable, db: str | Path | None, jit_kwargs: dict):
        self._fn = fn
        self._db = db
        self._jitted = jax.jit(fn, **jit_kwargs)
        self._jit_kwargs = jit_kwargs
        self._static_argnums = _as_tuple(jit_kwargs.get("static_argnums"))
        self._static_argnames = _as_tuple(jit_kwargs.get("static_argnames"))
        self._compiled: dict[Any, Any] = {}
        self._lookups: dict[Any, Lookup] = {}
        self._warned: set[str] = set()
        functools.update_wrapper(self, fn)

    def _signature(self, args: tuple, kwargs: dict) -> Any:
        """Static values by value, everything else by shape, dtype and sharding, as jax.jit keys."""
        static_positions = _indices(self._static_argnums, len(args))
        static = tuple((i, a) for i, a in enumerate(args) if i in static_positions)
        static += tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_argnames))
        dynamic = ([a for i, a in enumerate(args) if i not in static_positions],
                   {k: v for k, v in kwargs.items() if k not in self._static_argnames})
        leaves, tree = jax.tree.flatten(dynamic)
        avals = tuple(
            (tuple(x.shape), str(x.dtype), x.sharding if isinstance(x, jax.Array) else None)
            if hasattr(x, "shape") and hasattr(x, "dtype") else type(x)
            for x in leaves
        )
        return tree, avals, static

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(f"xtat.jit({getattr(self._fn, '__name__', 'fn')}): {message}", stacklevel=3)

    def _compile(self, args: tuple, kwargs: dict):
        lowered = self._jitted.lower(*args, **kwargs)
        found = lookup(Identity.of(lowered), self._db)
        if found.reason != "adopted":
            if found.reason != "not adopted":
                self._warn(f"compiling with XLA defaults ({found.reason})")
            return lowered.compile(), found
        candidate = found.candidate
        mismatch = runtime_mismatch(candidate)
        if mismatch:
            self._warn(mismatch)
        try:
            if candidate.program:
                from xtat.stages.program import rewrite

                rewritten = jax.jit(rewrite(self._fn, candidate.program), **self._jit_kwargs)
                lowered = rewritten.lower(*args, **kwargs)
            return lowered.compile(compiler_options=found.options or None), found
        except Exception as exc:  # e.g. an option removed in a newer XLA, or a rewrite that no longer applies
            self._warn(f"adopted config {found.candidate} not applicable here ({exc}); compiling with defaults")
            _mark_rejected(self._db, found.result_id, f"{type(exc).__name__}: {exc}")
            return self._jitted.lower(*args, **kwargs).compile(), Lookup({}, f"rejected: {exc}", found.result_id)

    def __call__(self, *args, **kwargs):
        try:
            key = self._signature(args, kwargs)
            compiled = self._compiled.get(key)
            if compiled is None:
                compiled, found = self._compile(args, kwargs)
                self._compiled[key] = compiled
                self._lookups[key] = found
            # Compiled executables take the dynamic arguments only.
            dynamic_args = tuple(a for i, a in enumerate(args) if i not in _indices(self._static_argnums, len(args)))
            dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_argnames}
            return compiled(*dynamic_args, **dynamic_kwargs)
        except Exception as exc:
            self._warn(f"tuned path unavailable ({type(exc).__name__}: {str(exc)[:200]}); using jax.jit")
            return self._jitted(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._jitted.lower(*args, **kwargs)

    def lookups(self) -> list[Lookup]:
        """What the store said for each signature compiled so far (for tests and `--verbose`)."""
        return list(self._lookups.values())

    def compiled_executables(self) -> list[Any]:
        return list(self._compiled.values())


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, (int, str)) else tuple(value)


def _indices(numbers: tuple, count: int) -> set[int]:
    return {n % count for n in numbers} if count else set()


def jit(fn: Callable | None = None, *, db: str | Path | None = None, **jit_kwargs):
    """Drop-in for `jax.jit(fn, **jit_kwargs)` that applies the adopted config from `db`.

    Usable as `xtat.jit(fn)`, `@xtat.jit` or `@xtat.jit(db=...)`.
    """
    if fn is None:
        return lambda f: _Jitted(f, db, jit_kwargs)
    return _Jitted(fn, db, jit_kwargs)
