"""Every strategy's incumbents on a workload, re-measured side by side in one session.

A run's best-so-far curve from search timing rests on one timing of each config, and
a tiny workload's timings differ by tens of percent from moment to moment: the
maximum over hundreds of them is mostly luck, and a target set by it says little
about which strategy found what. So after the runs, every config that was some run's
incumbent (its fastest verified config after some trial) is measured again,
interleaved with the default round by round, each incumbent with its own default in
its own fresh worker (`xtat.tuning.side_by_side`). The curves then show, after each trial, the
re-measured speedup of what the run would return if stopped there.

The result is kept in `DIR/<workload>/remeasured.json`; the same command reads it
back while it covers every incumbent of that workload's runs, and measures all of
them again when a run added a new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from xtat.capture.workload import Workload
from xtat.compare.analysis import RunRecord
from xtat.tuning.settings import TuneSettings

FORMAT = "xtat-compare-remeasure/1"


def remeasured_path(folder: Path) -> Path:
    return folder / "remeasured.json"


def incumbent_keys(runs: list[RunRecord]) -> list[str]:
    """The distinct configs (as keys) that were some run's incumbent, the default left out."""
    return sorted({key for run in runs for key in run.incumbents if key != "{}"})


def remeasure(workload: Workload, runs: list[RunRecord], folder: Path, settings: TuneSettings) -> dict[str, dict]:
    """{config key: {"speedup", "speedup_ci"} or {"error"}} for every incumbent of `runs`,
    read back from `folder` when recorded with these settings and these keys."""
    keys = incumbent_keys(runs)
    path = remeasured_path(folder)
    recorded = _read(path, settings)
    if recorded is not None and set(keys) <= set(recorded):
        return {key: recorded[key] for key in keys}
    if not keys:
        return {}
    from xtat.capture.workload import capture
    from xtat.stages.registry import make_stages
    from xtat.tuning.session import open_runner
    from xtat.tuning.side_by_side import side_by_side

    captured = capture(workload)
    speedups = {}
    with open_runner(captured, settings, verify_inputs=False, prefix="xtat-remeasure-") as runner:
        for key in keys:
            # Each incumbent beside its own default in its own fresh worker: builds that share a
            # process inherit its history (allocator, caches), which overstated speedups here.
            m = side_by_side(runner, make_stages(), {key: json.loads(key)}, settings).configs[key]
            speedups[key] = {"error": m.error or "no figures"} if m.figures is None else {
                "speedup": m.figures.speedup, "speedup_ci": list(m.figures.speedup_ci)}
    document = {"format": FORMAT, "settings": _settings(settings), "speedups": speedups}
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, indent=1))
    os.replace(partial, path)
    return speedups


def speedups_only(remeasured: Mapping[str, dict]) -> dict[str, float]:
    """The speedup of every incumbent that rebuilt."""
    return {key: row["speedup"] for key, row in remeasured.items() if "speedup" in row}


def _settings(settings: TuneSettings) -> dict:
    return json.loads(json.dumps({k: v for k, v in asdict(settings).items()
                                  if k in ("rounds", "min_sample_s", "samples", "seed")}))


def _read(path: Path, settings: TuneSettings) -> dict | None:
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if document.get("format") != FORMAT or document.get("settings") != _settings(settings):
        return None
    return document["speedups"]
