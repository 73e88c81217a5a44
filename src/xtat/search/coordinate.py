"""Coordinate descent: one decision at a time from the incumbent.

A pass visits the active decisions in order (parents first); for each, every
other value of it is measured from the incumbent (the fastest config so far),
so the next decision starts from a config that moved whenever a value was
faster. A pass that leaves the incumbent where it started ends the search:
no single change improves it.
"""

from __future__ import annotations

from typing import Any

from xtat.core.space import Config, Decision, config_key, is_active
from xtat.search.base import SearchStrategy


class CoordinateDescent(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options: Any) -> None:
        super().__init__(decisions, **options)
        self._queue: list[Config] = []  # the current decision's other values, from the incumbent
        self._pass: list[Decision] = []  # decisions left in the current pass
        self._pass_start: str | None = None  # key of the incumbent when the pass began

    def _center(self) -> Config:
        return self.incumbent[0] if self.incumbent is not None else self.base

    def _propose(self) -> Config | None:
        while not self._queue:
            if not self._pass:
                start = config_key(self._center())
                if start == self._pass_start:
                    return None  # a whole pass without a move: a local optimum
                self._pass_start, self._pass = start, self.active()
                continue
            decision = self._pass.pop(0)
            center = self._center()
            if decision in self.active() and is_active(decision, center):
                self._queue = list(self.neighbours(center, decision))
        return self._queue.pop(0)

    def _observe(self, config: Config, seconds: float | None) -> None:
        """The base's incumbent is the only state a move needs."""
