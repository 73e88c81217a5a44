"""What the parts of one tuning run share."""

from __future__ import annotations

from dataclasses import dataclass

from xtat.capture.workload import Capture
from xtat.runner.base import Runner
from xtat.stages.base import Stage
from xtat.store.base import Storage
from xtat.tuning.settings import TuneSettings


@dataclass(frozen=True)
class RunContext:
    """One run: where it records (`store`, under `workload_id` and `run_id`), what builds and times
    candidates (`runner`), the workload as captured, what was asked (`settings`), and every stage in
    order (configs are concretized by all of them, whichever are searched)."""

    store: Storage
    runner: Runner
    captured: Capture
    workload_id: int
    run_id: int
    settings: TuneSettings
    stages: tuple[Stage, ...]
    owner: str  # who claims this run's trials in the store (`store.sql.owner_id`)
