"""Decision points and configs.

A config is JSON: `{stage: {decision_id: value}}`. Decisions left out take
their default, so `{}` is the default configuration. Configs are stored in
canonical form (defaults dropped, keys sorted) so equal configs share a key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from xtat.core.errors import UserError

Config = dict[str, dict[str, object]]


@dataclass(frozen=True)
class Decision:
    stage: str
    id: str
    values: tuple
    default: object
    relaxes_numerics: bool = False
    # Conditional decision: active only when each (stage, id, value) holds,
    # e.g. a fusion barrier on CPU only survives with cse_barrier_expander off.
    requires: tuple[tuple[str, str, object], ...] = ()

    def admits(self, value: object) -> bool:
        return any(v == value and type(v) is type(value) for v in self.values)


def is_active(decision: Decision, config: Config) -> bool:
    return all(config.get(stage, {}).get(id) == value for stage, id, value in decision.requires)


def merge(*configs: Config) -> Config:
    """Later configs override earlier ones, decision by decision."""
    out: Config = {}
    for config in configs:
        for stage, decisions in config.items():
            out.setdefault(stage, {}).update(decisions)
    return out


@dataclass(frozen=True)
class Space:
    decisions: tuple[Decision, ...]
    left_out: tuple[str, ...] = ()  # curated options this XLA does not have

    def by_key(self) -> dict[tuple[str, str], Decision]:
        return {(d.stage, d.id): d for d in self.decisions}

    def canonical(self, config: Config) -> Config:
        """Validate a config against this space and drop default values."""
        if not isinstance(config, dict):
            raise UserError(f"a config must be a JSON object {{stage: {{decision: value}}}}, got {config!r}")
        known = self.by_key()
        out: Config = {}
        for stage, decisions in config.items():
            if not isinstance(decisions, dict):
                raise UserError(f"config stage {stage!r} must map decision ids to values, got {decisions!r}")
            for decision_id, value in decisions.items():
                decision = known.get((stage, decision_id))
                if decision is None:
                    raise UserError(
                        f"config names unknown decision {stage}.{decision_id}; "
                        "see `xtat space` for the decisions of this workload"
                    )
                if not decision.admits(value):
                    raise UserError(
                        f"config value {value!r} for {stage}.{decision_id} is not one of {list(decision.values)}"
                    )
                if value != decision.default:
                    out.setdefault(stage, {})[decision_id] = value
        # Inactive conditional decisions change nothing: drop them so equal programs share a key.
        for decision in self.decisions:
            if decision.requires and decision.id in out.get(decision.stage, {}) and not is_active(decision, out):
                del out[decision.stage][decision.id]
        return {stage: dict(sorted(d.items())) for stage, d in sorted(out.items()) if d}

    def extended(self, decisions: tuple[Decision, ...] | list[Decision]) -> Space:
        known = self.by_key()
        return Space(self.decisions + tuple(d for d in decisions if (d.stage, d.id) not in known), self.left_out)


def config_key(config: Config) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def config_id(config: Config) -> str:
    """Short stable id, used in logs and the test-only fault hook."""
    return hashlib.sha1(config_key(config).encode()).hexdigest()[:12]
