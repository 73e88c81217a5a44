"""Vetting of a stored config before anything applies it.

A store or an import file may come from another machine or person, so a
config is applied only when every decision in it is one the stages would
themselves offer here: each stage vets its own part (`Stage.vet`; e.g. the
codegen stage admits only curated options and values of this platform, and
options that relax numerics only when the recording run opted in).

and when the store holds a verified `ok` trial of the same config for the
same workload: an adopted config must have been measured, not just written.
"""

from __future__ import annotations

from collections.abc import Iterable

from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.stages.registry import STAGE_ORDER, make_stages


def problems(config: object, platform: str, numerics_opt_in: bool) -> list[str]:
    """What in `config` no stage would offer on `platform`; empty when it may be applied."""
    if not isinstance(config, dict):
        return [f"the config is a {type(config).__name__}, not an object of stages"]
    found = [f"unknown stage {stage!r} (stages: {', '.join(STAGE_ORDER)})" for stage in config
             if stage not in STAGE_ORDER]
    for stage, decisions in config.items():
        if not isinstance(decisions, dict):
            found.append(f"stage {stage!r} holds a {type(decisions).__name__}, not decisions")
    if found:
        return found
    for stage in make_stages():
        found += stage.vet(config.get(stage.name, {}), platform, numerics_opt_in)
    return found


def refusals(config: object, platform: str, run_settings: dict | None,
             trials: Iterable[tuple[str, str]]) -> list[str]:
    """Why an adopted `config` may not be applied: `problems`, given the recording run's settings, and
    no verified `ok` trial of exactly this config among `trials` ((config key, status) pairs)."""
    found = problems(config, platform, numerics_opt_in=(run_settings or {}).get("allow_numerics_change") is True)
    if not found:
        key = config_key(config) if isinstance(config, dict) else ""  # problems() refused any other shape
        if not any(status == TrialStatus.OK and trial_key == key for trial_key, status in trials):
            found.append("no verified ok trial of the adopted config")
    return found
