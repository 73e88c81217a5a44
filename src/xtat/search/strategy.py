"""The ask/tell interface every search strategy implements (see `search.base` for the shared base)."""

from __future__ import annotations

from typing import Protocol

from xtat.core.space import Config, Decision


class Strategy(Protocol):
    inactive: list[Decision]  # conditional decisions whose requirement cannot be searched here

    def ask(self) -> Config | None:
        """The next config to measure, or None when the strategy is done."""

    def tell(self, config: Config, seconds: float | None, same_as: Config | None = None,
             spent_s: float | None = None) -> None:
        """The measured median of a config it asked for (None: failed or rejected), an earlier
        config whose executable it rebuilt exactly (None: a new executable), and what its trial
        cost in seconds (compile, checks and timing; None: not known)."""

    def finish(self) -> Config | None:
        """Once the search's time has run out: the one config that completes what the strategy
        started (the sweep's: its last clear win combined with the best so far), or None."""

    @property
    def no_ops(self) -> list[str]:
        """Decisions ("stage.id") that never changed the executable, as probed so far."""
