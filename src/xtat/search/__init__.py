"""Search strategies behind one ask/tell interface (`search.strategy.Strategy`).

`make_strategy(name, ...)` builds one by name; `STRATEGIES` lists the names.
"""

from __future__ import annotations

from typing import Callable

from xtat.space.space import Config, Decision

STRATEGIES = ("sweep",)


def make_strategy(name: str, decisions: list[Decision], *, seed: int, base: Config,
                  canonical: Callable[[Config], Config], searchable: Callable[[str, str], bool]):
    """The strategy `name` over `decisions` around `base`, deterministic for a seed."""
    from xtat.errors import UserError

    if name == "sweep":
        from xtat.search.sweep import SweepThenRandom

        return SweepThenRandom(decisions, seed, base, canonical=canonical, searchable=searchable)
    raise UserError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
