"""Tuned compile options on a jit that ends up nested inside another trace.

jax refuses `jax.jit(f, compiler_options=...)` when the call is staged into
an outer trace (an outer jit, `grad`, `scan`): XLA compiles one module, with
the outer program's options, so the inner ones could not apply. `jax.jit(f)`
without options nests fine, and `xtat.jit` must nest wherever `jax.jit` does.

The choices were a Python frame around every call (10-12% of a 1-leaf
dispatch here: `benchmarks/dispatch.py`, python wrapper column) or teaching jax's staging rule for `jit` to drop the
options of xtat's own jit objects when they are staged, which is what XLA
would do with them anyway. We do the latter: the rule is wrapped once, and
it changes nothing for any jit object but the ones registered here (matched
by the identity of their options tuple). Where this jax has no such rule
(`available()` is False), `xtat.jit` keeps a Python frame instead.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_lock = threading.Lock()
# id(options tuple) -> the tuple, for the life of the xtat.jit entry that owns it.
_registered: dict[int, tuple] = {}
_installed: bool | None = None


def available() -> bool:
    """Install the staging rule once; False where this jax's internals differ."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = _install()
        return _installed


def _install() -> bool:
    try:
        from jax._src import pjit
        from jax._src.interpreters import partial_eval as pe

        original = pe.custom_staging_rules[pjit.jit_p]
        if original is not getattr(pjit, "pjit_staging_rule", None):
            return False
    except Exception:
        return False

    def staging_rule(trace: Any, source_info: Any, *args: Any, **params: Any) -> Any:
        options = params.get("compiler_options_kvs")
        if options and _registered.get(id(options)) is options:
            params = {**params, "compiler_options_kvs": ()}
        return original(trace, source_info, *args, **params)

    pe.custom_staging_rules[pjit.jit_p] = staging_rule
    return True


def register(owner: object, jitted: Any) -> bool:
    """Let `jitted` (a jax.jit object with compiler options) nest; forgotten when `owner` is collected."""
    if not available():
        return False
    info = getattr(jitted, "_jit_info", None)
    if info is None:  # not the jit object this module knows
        return False
    options = info.compiler_options_kvs
    if not options:
        return True  # nothing to drop: it nests as it is
    with _lock:
        _registered[id(options)] = options
    weakref.finalize(owner, _registered.pop, id(options), None)
    return True
