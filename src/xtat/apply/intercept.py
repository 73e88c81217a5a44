"""`xtat run`'s no-edit path: every program a process compiles gets its adopted compile options.

A process started by `xtat run` finds `boot/sitecustomize.py` first on its path; once the program
imports jax, that file calls `install`, which wraps the step where jax turns a lowered program into
an executable (`MeshComputation.compile`, which `jax.jit`, `jax.jit(...).lower(...).compile()`,
`flax.nnx.jit`, `equinox.filter_jit` and Haiku under `jax.jit` all reach). There each program is
fingerprinted exactly as `xtat tune` and `xtat.jit` key it (`Identity`: its StableHLO and its
input avals with donation, in this environment), looked up in the store (`lookup`, which vets the
record), and compiled with the adopted compile options; every other program gets XLA's defaults.

What this applies is what lives in compile options (the passes and codegen stages, and GPU
autotune results). A config that also holds program rewrites or a sharding layout changes the
traced program, which only `xtat.jit` can do at trace time: it is not applied in part (it was
confirmed whole), and the process says so once. A program compiled with compiler options of its
own (`jax.jit(..., compiler_options=...)`, `xtat.jit`) is left as it is.

The wrapped method is private jax API: when it is missing or reads differently, nothing is applied
and one warning says so; the program runs with XLA's defaults.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a program is first compiled: a process that compiles none pays nothing
    from xtat.apply.lookup import Lookup
    from xtat.capture.workload import Identity

PREFIX = "xtat run: "


def _say(message: str) -> None:
    sys.stderr.write(PREFIX + message + "\n")
    sys.stderr.flush()


def identity_of(computation: Any) -> Identity:
    """The `Identity` of a lowered program as jax hands it to its compiler (`MeshComputation`): the
    same keys `Identity.of(jax.jit(f).lower(...))` gives. Hoisted constants come first in its
    inputs and are not the user's arguments, so they are left out, as `Lowered.args_info` does."""
    from xtat.capture.workload import Identity, environment_identity, fingerprint, program_key

    constants = len(computation.const_args)
    avals = computation.compile_args["all_args_info"].in_avals[constants:]
    # Donation flags are kept for the inputs the program uses (jax drops unused ones); an unused
    # input reads as not donated, so a program with an unused donated input matches no record.
    kept = computation.compile_args["kept_var_idx"]
    flags = iter(list(computation._donated_invars)[constants:])
    donated = [next(flags) if constants + i in kept else False for i in range(len(avals))]
    if next(flags, None) is not None:
        raise ValueError("more donation flags than used inputs")
    described = [{"shape": list(aval.shape), "dtype": str(aval.dtype),
                  "weak_type": bool(getattr(aval, "weak_type", False)), "donated": bool(given)}
                 for aval, given in zip(avals, donated)]
    env = environment_identity()
    program = program_key(computation.as_text(), described)
    return Identity(program=program, fingerprint=fingerprint(program, env), env=env, avals=described)


class Interceptor:
    """The store's adopted compile options, applied to each program as it is compiled."""

    def __init__(self, db: str | Path | None):
        self._db = db
        self._lookups: dict[str, Lookup] = {}
        self._lock = threading.Lock()
        self._warned = False
        self._keys: set[str] | None = None  # the store's fingerprints and program keys, read once

    def _stored_keys(self) -> set[str]:
        """The fingerprint and program key of every workload with an adopted config in force: a
        program with neither is looked up no further (one read of the store per process, not one per
        compile; an SQLite store is read with the standard library, so a process none of whose
        programs has a config in force never imports SQLAlchemy: `xtat run` with an empty store, or
        one whose configs were all withdrawn, costs a script next to nothing)."""
        if self._keys is None:
            from xtat.apply.launch import sqlite_file, stored_keys

            file = sqlite_file(self._db)
            keys = stored_keys(file) if file is not None else None
            if keys is None:
                keys = self._keys_through_the_store()
            self._keys = keys
        return self._keys

    def _keys_through_the_store(self) -> set[str]:
        from xtat.store import open_store

        try:
            store = open_store(self._db, read_only=True)
            try:
                if store.is_new():
                    return set()
                return {key for w in store.workloads() if (result := store.latest_result(w.id)) and result.adopted
                        for key in (w.fingerprint, w.program)}
            finally:
                store.close()
        except Exception as exc:  # an unreadable store: nothing applied, said once
            self._warn_once(f"the store is unreadable ({type(exc).__name__}: {exc}); compiling with XLA's defaults")
            return set()

    def options(self, computation: Any) -> tuple[dict[str, object], Lookup | None]:
        """The compile options to add for this program ({} for XLA's defaults) and its lookup (None:
        the store has no record of it)."""
        with self._lock:
            if not self._stored_keys():
                return {}, None  # nothing tuned: not even a fingerprint to take
        try:
            identity = identity_of(computation)
        except Exception as exc:  # a jax whose private lowering reads differently
            self._warn_once(f"cannot fingerprint programs with this jax ({type(exc).__name__}: {exc}); "
                            "compiling with XLA's defaults")
            return {}, None
        stored = self._stored_keys()
        if identity.fingerprint not in stored and identity.program not in stored:
            return {}, None  # no record: XLA's defaults, and nothing more imported or read
        from xtat.apply.lookup import Found, lookup

        with self._lock:
            found = self._lookups.get(identity.fingerprint)
            if found is None:
                found = lookup(identity, self._db)
                self._lookups[identity.fingerprint] = found
                self._report(found, identity)
        if found.found is not Found.ADOPTED or found.candidate.program or found.candidate.layout:
            return {}, found
        return dict(found.options), found

    def _report(self, found: Lookup, identity: Identity) -> None:
        from xtat.apply.lookup import Found

        program = identity.fingerprint[:12]
        if found.found is Found.ADOPTED:
            if found.candidate.program or found.candidate.layout:
                _say(f"program {program}: its adopted config rewrites the traced program, which only xtat.jit "
                     "can apply; compiling it with XLA's defaults")
            elif found.options:
                _say(f"program {program}: adopted compile options applied ({', '.join(sorted(found.options))})")
        elif found.found in (Found.STALE, Found.REJECTED, Found.UNREADABLE):
            _say(f"program {program}: not applied ({found.reason})")

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            _say(message)

    def rejected(self, found: Lookup, error: Exception) -> None:
        """XLA refused the adopted options: say so once, record it, and use XLA's defaults from now on."""
        from xtat.apply.lookup import Found, Lookup, mark_rejected

        reason = f"this XLA rejected the adopted options: {type(error).__name__}: {error}"
        _say(f"{reason}; compiling with XLA's defaults")
        mark_rejected(self._db, found.result_id, reason)
        with self._lock:
            for key, value in list(self._lookups.items()):
                if value is found:
                    self._lookups[key] = Lookup(Found.REJECTED, reason, found.result_id)


def install(db: str | Path | None) -> bool:
    """Wrap jax's compile step in this process with an `Interceptor` of `db`; False (and one line
    on stderr) when this jax has no such step to wrap."""
    try:
        from jax._src.interpreters import pxla

        mesh_computation = pxla.MeshComputation
        original: Callable = mesh_computation.compile
    except (ImportError, AttributeError) as exc:
        _say(f"this jax has no compile step xtat can wrap ({exc}); programs compile with XLA's defaults")
        return False
    if getattr(original, "_xtat_original", None) is not None:
        return True  # installed already
    interceptor = Interceptor(db)

    def compile(self: Any, compiler_options: Any = None, *, device_assignment: Any = None) -> Any:
        # Options of the caller's own (a compile call's, or jax.jit's `compiler_options`) win: untouched.
        if compiler_options is not None or getattr(self, "_compiler_options_kvs", None):
            return original(self, compiler_options, device_assignment=device_assignment)
        cached = getattr(self, "_executable", None)
        if cached is not None and device_assignment is None:
            return cached
        options, found = interceptor.options(self)
        if not options or found is None:
            return original(self, None, device_assignment=device_assignment)
        try:
            executable = original(self, options, device_assignment=device_assignment)
        except Exception as exc:  # an option this XLA does not know or refuses
            interceptor.rejected(found, exc)
            return original(self, None, device_assignment=device_assignment)
        if device_assignment is None:
            self._executable = executable  # as jax caches its own default compile: one compile per lowering
        return executable

    compile._xtat_original = original  # type: ignore[attr-defined]  # marks the wrapper to undo it
    compile.__doc__ = original.__doc__
    setattr(mesh_computation, "compile", compile)  # noqa: B010  (a method replaced on its class)
    return True
