"""TEST-ONLY fault injection for worker processes.

Enabled only by the environment variable XTAT_FAULT, so that tests can make
a chosen candidate crash, hang or lie with real processes:

    XTAT_FAULT="<config_id>:<phase>:<kind>[;...]"

phase is `compile`, `run` or `verify` (the check on make_inputs(1)); kind is
one of KINDS. `*` as config_id matches every candidate except the default,
`default` matches the default. `slow` adds 2 ms to every call of the build
(to make the others look faster); `wrong` perturbs its outputs by 1%;
`flaky` perturbs them on every third check only (a config wrong ~30% of the
time); `lazy` (phase run) returns its first outputs again without computing
(a stale buffer, work optimised away).
Nothing in normal operation sets XTAT_FAULT.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

KINDS = ("segfault", "abort", "hang", "hang_hard", "raise", "oom", "exit", "slow", "wrong", "flaky", "lazy")


def _rules() -> list[tuple[str, str, str]]:
    spec = os.environ.get("XTAT_FAULT", "")
    rules = []
    for part in filter(None, spec.split(";")):
        config_id, phase, kind = part.split(":")
        rules.append((config_id, phase, kind))
    return rules


def _matching(config_id: str, phase: str, is_default: bool) -> list[str]:
    return [kind for rule_id, rule_phase, kind in _rules()
            if rule_phase == phase and (rule_id == config_id or (rule_id == "*" and not is_default))]


def slowdown_s(config_id: str) -> float:
    return 0.002 if "slow" in _matching(config_id, "run", config_id == "default") else 0.0


def is_lazy(config_id: str) -> bool:
    return "lazy" in _matching(config_id, "run", config_id == "default")


def corrupts(config_id: str, phase: str, check_number: int) -> bool:
    kinds = _matching(config_id, phase, config_id == "default")
    return "wrong" in kinds or ("flaky" in kinds and check_number % 3 == 2)


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
