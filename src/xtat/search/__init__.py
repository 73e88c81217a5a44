"""Search strategies behind one ask/tell interface (`search.strategy.Strategy`). Adding one is a
module with a `SearchStrategy` subclass and its line in `STRATEGY_CLASSES`.

Each is built on `search.base.SearchStrategy` (base config first, dedup,
conditional decisions, no-op probes, incumbent, determinism for a seed).
`make_strategy(name, ...)` builds one by name; `STRATEGIES` lists the names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xtat.core.errors import UserError
from xtat.core.space import Config, Decision
from xtat.model.cost_model import Prior
from xtat.search.anneal import SimulatedAnnealing
from xtat.search.base import SearchStrategy
from xtat.search.coordinate import CoordinateDescent
from xtat.search.evolution import RegularizedEvolution
from xtat.search.gp import GPSearch
from xtat.search.grid import GridSearch
from xtat.search.random_search import RandomSearch
from xtat.search.strategy import Strategy
from xtat.search.sweep import SweepThenRandom
from xtat.search.tpe import TreeParzen
from xtat.search.trees import ModelSearch

STRATEGY_CLASSES: dict[str, type[SearchStrategy]] = {
    "sweep": SweepThenRandom,
    "random": RandomSearch,
    "grid": GridSearch,
    "coordinate": CoordinateDescent,
    "anneal": SimulatedAnnealing,
    "evolution": RegularizedEvolution,
    "tpe": TreeParzen,
    "model": ModelSearch,
    "gp": GPSearch,
}
STRATEGIES = tuple(STRATEGY_CLASSES)


def make_strategy(name: str, decisions: list[Decision], *, seed: int, base: Config,
                  canonical: Callable[[Config], Config], searchable: Callable[[str, str], bool],
                  budget: int | None = None, prior: Callable[[], Prior | None] | None = None,
                  first: tuple[Config, ...] = ()) -> Strategy:
    """The strategy `name` over `decisions` around `base`, deterministic for a seed; `budget`
    (configs the whole run may consider, None: no limit) lets grid refuse a space it cannot cover.
    `prior` computes what the store's other workloads teach; called only for a strategy that
    `uses_prior`. `first`: configs asked right after the base, before the strategy's own."""
    strategy = STRATEGY_CLASSES.get(name)
    if strategy is None:
        raise UserError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
    extra: dict[str, Any] = {"prior": prior() if prior else None} if strategy.uses_prior else {}
    return strategy(decisions, seed=seed, base=base, canonical=canonical, searchable=searchable, budget=budget,
                    first=first, **extra)
