"""TEST-ONLY fault injection for worker processes.

Enabled only by the environment variable XTAT_FAULT, together with the test
switch XTAT_TEST_HOOKS=1 (`xtat.core.test_hooks`), so that tests can make
a chosen candidate crash, hang or lie with real processes:

    XTAT_FAULT="<who>:<phase>:<kind>[;...]"

who is a config_id; `*` matches every candidate except the default;
`default` matches the default; `!<config_id>` matches every build, the
default included, except that config (to make one config the clear winner).
phase is `compile`, `run` or `verify` (the check on make_inputs(1)); kind is
one of KINDS. `slow` adds 1 ms to every call of the build (to make the
others look faster), or at phase compile 0.5 s to its compile; `wrong` perturbs its outputs by 1%; `flaky` perturbs
them on every third check only (a config wrong ~30% of the time); `nan` and
`inf` put a NaN or +Inf into the first element of each floating output (a
non-finite result where the reference may be finite); `lazy` (phase run)
returns its first outputs again without computing (a stale buffer, work
optimised away).
Nothing in normal operation sets XTAT_FAULT.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

import numpy as np

from xtat.core.test_hooks import hook

KINDS = ("segfault", "abort", "hang", "hang_hard", "raise", "oom", "exit", "slow", "wrong", "flaky", "nan", "inf",
         "lazy")


def _rules() -> list[tuple[str, str, str]]:
    spec = hook("XTAT_FAULT")
    rules = []
    for part in filter(None, spec.split(";")):
        who, phase, kind = part.split(":")
        rules.append((who, phase, kind))
    return rules


def _applies(who: str, config_id: str, is_default: bool) -> bool:
    if who.startswith("!"):
        return who[1:] != config_id
    return who == config_id or (who == "*" and not is_default)


def _matching(config_id: str, phase: str, is_default: bool) -> list[str]:
    return [kind for who, rule_phase, kind in _rules() if rule_phase == phase and _applies(who, config_id, is_default)]


def slowdown_s(config_id: str) -> float:
    # 1 ms: a tiny build of ~50 us must stay under the tuner's 50x "impossibly fast" limit
    # against a slowed default (2 ms crossed it on a fast CPU and rejected the tests' winner).
    return 0.001 if "slow" in _matching(config_id, "run", config_id == "default") else 0.0


def is_lazy(config_id: str) -> bool:
    return "lazy" in _matching(config_id, "run", config_id == "default")


def corrupted(outputs: list[np.ndarray], config_id: str, phase: str, check_number: int) -> list[np.ndarray]:
    """The outputs as a faulty build would return them at this check (unchanged without a fault)."""
    kinds = _matching(config_id, phase, config_id == "default")
    floating = [np.issubdtype(o.dtype, np.inexact) and o.size > 0 for o in outputs]
    if "wrong" in kinds or ("flaky" in kinds and check_number % 3 == 2):
        return [o * 1.01 if f else o for o, f in zip(outputs, floating)]
    for kind, value in (("nan", np.nan), ("inf", np.inf)):
        if kind in kinds:
            outputs = [_first_set(o, value) if f else o for o, f in zip(outputs, floating)]
    return outputs


def _first_set(array: np.ndarray, value: float) -> np.ndarray:
    changed = array.copy()
    changed.reshape(-1)[0] = value
    return changed


def inject(config_id: str, phase: str, is_default: bool) -> None:
    """Misbehave as XTAT_FAULT asks for this candidate and phase, else return."""
    for kind in _matching(config_id, phase, is_default):
        if kind == "segfault":
            ctypes.string_at(0)
        elif kind == "abort":
            os.abort()
        elif kind == "exit":
            os._exit(3)
        elif kind == "hang":
            time.sleep(10_000)
        elif kind == "hang_hard":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(10_000)
        elif kind == "raise":
            raise RuntimeError(f"injected fault at {phase} of {config_id}")
        elif kind == "oom":
            raise MemoryError(f"injected out-of-memory at {phase} of {config_id}")
        elif kind == "slow" and phase == "compile":
            time.sleep(0.5)  # a compile that takes a while (for compile slots to overlap)
