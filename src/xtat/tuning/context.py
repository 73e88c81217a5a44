"""What the parts of one tuning run share."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from xtat.capture.workload import Capture
from xtat.runner.base import Runner
from xtat.stages.base import Stage
from xtat.store.base import Storage
from xtat.tuning.settings import DECIDE_SHARE, TuneSettings


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
    deadline: float | None = None  # the `time.monotonic()` instant the run must end by (`run_time_s`)
    # Set when the run stops early (Ctrl-C, SIGTERM, an error): a measurement still in flight records
    # nothing, its trial stays claimed and running, and a resumed run measures it again.
    abandoned: threading.Event = field(default_factory=threading.Event, compare=False)

    @property
    def search_until(self) -> float | None:
        """When the search stops, leaving the decision its share of the run's time (`DECIDE_SHARE`)."""
        if self.deadline is None or self.settings.run_time_s is None:
            return None
        return self.deadline - DECIDE_SHARE * self.settings.run_time_s

    def time_left(self) -> float | None:
        """Seconds until the run's deadline (None: no limit)."""
        return None if self.deadline is None else self.deadline - time.monotonic()
