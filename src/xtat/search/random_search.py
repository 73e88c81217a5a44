"""Random search: the base config, then uniform samples of the active space.

The baseline every other strategy must beat at equal budget.
"""

from __future__ import annotations

from xtat.core.space import Config
from xtat.search.base import SearchStrategy


class RandomSearch(SearchStrategy):
    def _propose(self) -> Config | None:
        return self.sample()

    def _observe(self, config: Config, seconds: float | None) -> None:
        """Samples do not depend on results."""
