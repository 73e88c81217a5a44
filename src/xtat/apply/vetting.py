"""Vetting of a stored config before anything applies it.

A store or an import file may come from another machine or person, so a
config is applied only when every decision in it is one the stages would
themselves offer here:

- `codegen`: a curated option of this platform, with one of its curated
  values (or XLA's default); so never an output, file, path or dump option.
  Options that relax numerics only when the run that produced the record
  opted in (`allow_numerics_change`, recorded with the run's settings).
- `passes`: a pass from the passes stage's safe list, switched off or on.
- `runtime`: a CPU count this process can have, a positive host device count.
- `program`: decision ids are checked against the program when it is
  rewritten (an unknown id is refused there).

and when the store holds a verified `ok` trial of the same config for the
same workload: an adopted config must have been measured, not just written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable

from xtat.space.space import config_key
from xtat.stages.base import STAGE_ORDER

_MAX_HOST_DEVICES = 4096


def problems(config: object, platform: str, numerics_opt_in: bool) -> list[str]:
    """What in `config` no stage would offer on `platform`; empty when it may be applied."""
    from xtat.space.space import codegen_space
    from xtat.stages.passes import SAFE
    from xtat.stages.runtime import CPUS, HOST_DEVICES

    if not isinstance(config, dict):
        return [f"the config is a {type(config).__name__}, not an object of stages"]
    found = [f"unknown stage {stage!r} (stages: {', '.join(STAGE_ORDER)})" for stage in config
             if stage not in STAGE_ORDER]
    for stage, decisions in config.items():
        if not isinstance(decisions, dict):
            found.append(f"stage {stage!r} holds a {type(decisions).__name__}, not decisions")
    if found:
        return found
    with warnings.catch_warnings():  # options this XLA lacks are a tuning note, not something to apply
        warnings.simplefilter("ignore")
        offered = {d.id: d for d in codegen_space(platform, allow_numerics_change=True).decisions}
    for name, value in config.get("codegen", {}).items():
        decision = offered.get(name)
        if decision is None:
            found.append(f"codegen option {name!r} is not one xtat searches on {platform}")
        elif not decision.admits(value):
            found.append(f"codegen option {name}={value!r} is not a value xtat offers ({list(decision.values)})")
        elif decision.relaxes_numerics and value != decision.default and not numerics_opt_in:
            found.append(f"{name}={value!r} relaxes numerics, and the run that recorded it did not opt in")
    for name, value in config.get("passes", {}).items():
        if name not in SAFE or not isinstance(value, bool):
            found.append(f"pass {name!r}={value!r} is not a pass the passes stage may switch off")
    runtime = config.get("runtime", {})
    for name, value in runtime.items():
        if name not in (CPUS, HOST_DEVICES):
            found.append(f"runtime decision {name!r} is unknown")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            found.append(f"runtime {name}={value!r} is not a positive count")
        elif name == CPUS and value > len(os.sched_getaffinity(0)):
            found.append(f"runtime cpus={value} exceeds the {len(os.sched_getaffinity(0))} CPUs of this process")
        elif name == HOST_DEVICES and value > _MAX_HOST_DEVICES:
            found.append(f"runtime host_devices={value} is beyond {_MAX_HOST_DEVICES}")
    return found


def refusals(config: object, platform: str, run_settings: dict | None,
             trials: Iterable[tuple[str, str]]) -> list[str]:
    """Why an adopted `config` may not be applied: `problems`, given the recording run's settings, and
    no verified `ok` trial of exactly this config among `trials` ((config key, status) pairs)."""
    found = problems(config, platform, numerics_opt_in=(run_settings or {}).get("allow_numerics_change") is True)
    if not found:
        key = config_key(config)  # type: ignore[arg-type]
        if not any(status == "ok" and trial_key == key for trial_key, status in trials):
            found.append("no verified ok trial of the adopted config")
    return found
