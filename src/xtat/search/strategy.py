"""The ask/tell interface every search strategy implements."""

from __future__ import annotations

from typing import Protocol

from xtat.space.space import Config


class Strategy(Protocol):
    def ask(self) -> Config | None:
        """The next config to measure, or None when the strategy is done."""

    def tell(self, config: Config, seconds: float | None, same_as_base: bool = False) -> None:
        """The measured median of a config it asked for (None: failed or rejected), and
        whether its executable was identical to the base config's."""
