"""Grid search: every config of the active space, for small spaces only.

A conditional decision is enumerated only where its parents make it active,
so the grid holds each distinct config once. A space larger than the limit
(the budget, and at most `GRID_LIMIT`) is refused before this search asks for
anything: a truncated grid would search one corner of the space.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from xtat.core.errors import UserError
from xtat.core.space import Config, Decision, is_active
from xtat.search.base import SearchStrategy, with_value

GRID_LIMIT = 4096


class GridSearch(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options: Any) -> None:
        super().__init__(decisions, **options)
        limit = GRID_LIMIT if self.budget is None else min(self.budget, GRID_LIMIT)
        size, exact = self.space_size
        if size > limit:
            stages = ", ".join(sorted({d.stage for d in self.decisions}))
            bound = "the budget" if self.budget is not None and self.budget < GRID_LIMIT else "the grid limit"
            raise UserError(
                f"--strategy grid: the space of {len(self.decisions)} decisions ({stages}) has "
                f"{'' if exact else 'at least '}{size} configs, more than {bound} of {limit}; "
                "use --strategy evolution, tpe or random, or narrow the space with --options or --stages"
            )
        self._grid = self._enumerate(0, self.base)

    def _enumerate(self, index: int, config: Config) -> Iterator[Config]:
        if index == len(self.decisions):
            yield config
            return
        decision = self.decisions[index]  # parents first: its activity is settled by now
        if not is_active(decision, config):
            yield from self._enumerate(index + 1, config)
            return
        for value in decision.values:
            yield from self._enumerate(index + 1, with_value(config, decision, value))

    def _propose(self) -> Config | None:
        return next(self._grid, None)

    def _observe(self, config: Config, seconds: float | None) -> None:
        """The grid does not depend on results."""
