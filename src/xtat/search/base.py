"""The shared base of every search strategy.

Contract (what a strategy built on `SearchStrategy` gets and must provide):

- A subclass implements `_propose() -> Config | None`: the next config it
  would like measured (any form: the base canonicalises it), or None when it
  has nothing more to propose. It implements `_observe(config, seconds)` to
  learn a result: `seconds` is the measured median, or None for a config that
  failed or was rejected. A subclass may use only `self.rng` (or a generator
  seeded from `seed`) for chance, so that a run is deterministic for a seed.
- `ask()` returns the base config first, for every strategy, then the configs
  the caller queued (`first`: Optuna's `enqueue_trial`, e.g. a config adopted
  on another signature of the same function), then the subclass's proposals,
  without the values of inactive conditional decisions, canonicalised, and
  never one asked before: a proposal
  already measured is observed again from its recorded result at no cost (so
  a strategy that walks back to a known config moves on), and a proposal still
  awaiting its result is observed when that result is told. `ask()` returns
  None when the strategy is done, when every config of the space was asked
  (`space_size`), or when it proposes only known configs `max_tries` times
  in a row. `canonical` must give equal configs equal keys.
- `tell(config, seconds, same_as)` records a result; `same_as` is an earlier
  config whose executable this one rebuilt exactly (None: a new executable).
  The base keeps the incumbent (the fastest config with a measured time: a
  failed config never becomes one) and two kinds of executable bookkeeping:
  - no-ops: the single-decision probes from the base config (`probes`) tell
    which decisions never change the executable (`no_ops`: every probe built
    the base's executable, read off the executable classes below); they are
    left out of `active()` from then on;
  - inert decisions: two told configs that differ in at most `MAX_INERT_DIFF`
    decisions and built the same executable show those decisions inert there;
    two that differ in one decision and built different executables show it
    effective. A decision's effect often depends on others (an XNNPACK switch
    changes nothing unless some fusion uses XNNPACK), so a decision seen inert
    more than `INERT_ODDS` times as often as effective is taken as inert
    (`known_inert()`); `mutate` changes one only when no other is left, so a search spends fewer
    trials rebuilding an executable it already has (a `duplicate` trial).
- `inactive` lists the conditional decisions whose requirement cannot be
  searched here (its stage is not searched, or comes later in a staged
  formulation): they can never be active and are not searched.
- Resume: the tuner re-asks and tells back the recorded results, so the same
  seed and the same results give the same asks, and the search continues
  where it stopped.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from math import prod

from xtat.core.space import Config, Decision, config_key, is_active, merge

Canonical = Callable[[Config], Config]
Searchable = Callable[[str, str], bool]
MAX_PARENT_ASSIGNMENTS = 1 << 16  # beyond this, counting the space exactly would take too long
# Configs differing in more decisions than this say little about any one of them when they rebuild
# the same executable (and comparing every pair of them would cost more than it tells).
MAX_INERT_DIFF = 2
INERT_ODDS = 2


def requirements(decision: Decision) -> Config:
    """The config fragment that makes a conditional decision active."""
    config: Config = {}
    for stage, id, value in decision.requires:
        config.setdefault(stage, {})[id] = value
    return config


def value_of(config: Config, decision: Decision) -> object:
    return config.get(decision.stage, {}).get(decision.id, decision.default)


def with_value(config: Config, decision: Decision, value: object) -> Config:
    return merge(config, {decision.stage: {decision.id: value}})


def parents_first(decisions: list[Decision]) -> list[Decision]:
    """The decisions ordered so that each comes after the decisions it requires."""
    by_key = {(d.stage, d.id): d for d in decisions}
    depth: dict[tuple[str, str], int] = {}

    def depth_of(decision: Decision, seen: frozenset = frozenset()) -> int:
        key = (decision.stage, decision.id)
        if key not in depth:
            parents = [by_key[(st, i)] for st, i, _ in decision.requires if (st, i) in by_key and (st, i) not in seen]
            depth[key] = 1 + max((depth_of(p, seen | {key}) for p in parents), default=-1)
        return depth[key]

    return sorted(decisions, key=depth_of)  # stable: the space's order within a depth


class SearchStrategy(ABC):
    """Base of the strategies: see the module's contract."""

    # Set by a strategy that learns from the store's other workloads: it is then built with
    # `prior=` (model.cost_model.Prior), which the tuner computes only for such a strategy.
    uses_prior = False

    def __init__(self, decisions: list[Decision], *, seed: int = 0, base: Config | None = None,
                 canonical: Canonical = lambda config: config, searchable: Searchable = lambda stage, id: True,
                 budget: int | None = None, max_tries: int = 1000, first: tuple[Config, ...] = ()):
        self.inactive = [d for d in decisions if not all(searchable(st, i) for st, i, _ in d.requires)]
        self.decisions = parents_first([d for d in decisions if d not in self.inactive])
        self.canonical = canonical
        self.base = canonical(base or {})
        self.seed = seed
        self.budget = budget
        self.rng = random.Random(seed)
        self.max_tries = max_tries
        self.results: dict[str, float | None] = {}  # config key -> told result
        self.incumbent: tuple[Config, float] | None = None
        self._pending: set[str] = set()  # asked, not yet told
        self._waiting: Counter[str] = Counter()  # pending key -> later proposals of it awaiting its result
        self._asked_base = False
        self._finish = False  # `ask` on behalf of `finish`
        self._queued = [merge(self.base, config) for config in first]  # asked right after the base
        self.probes = self._probes()
        self._probe_keys = [(d, [config_key(c) for c in configs]) for d, configs in self.probes]
        # Executable bookkeeping: each told config's executable class (configs that built the same
        # executable share one), and per decision how often it was seen inert or effective.
        self._executables: dict[str, tuple[Config, int]] = {}  # config key -> (config, class)
        self._inert: Counter[tuple[str, str]] = Counter()
        self._effective: Counter[tuple[str, str]] = Counter()
        self.space_size = self._space_size()

    # -- to implement -------------------------------------------------------------------------

    @abstractmethod
    def _propose(self) -> Config | None:
        """The next config this strategy would like measured; None: it is done."""

    @abstractmethod
    def _observe(self, config: Config, seconds: float | None) -> None:
        """A result for a config it proposed (None: failed or rejected)."""

    # -- the ask/tell interface ---------------------------------------------------------------

    def ask(self) -> Config | None:
        size, exact = self.space_size
        if exact and len(self.results) + len(self._pending) >= size:
            return None  # every config of the space was asked
        for _ in range(self.max_tries):
            proposal = (self._first() if not self._asked_base else self._queued.pop(0) if self._queued
                        else self._finishing() if self._finish else self._propose())
            self._asked_base = True
            if proposal is None:
                return None
            config = self.normalize(proposal)
            key = config_key(config)
            if key in self.results:
                self._observe(config, self.results[key])  # known: its result costs nothing
            elif key in self._pending:
                self._waiting[key] += 1
            else:
                self._pending.add(key)
                return config
        return None  # only known configs were proposed: the space is exhausted around the search

    def tell(self, config: Config, seconds: float | None, same_as: Config | None = None,
             spent_s: float | None = None) -> None:
        key = config_key(config)
        self._pending.discard(key)
        self.results[key] = seconds
        if seconds is not None or same_as is not None:
            self._learn_executable(key, config, same_as)
        if seconds is not None and (self.incumbent is None or seconds < self.incumbent[1]):
            self.incumbent = (config, seconds)
        for _ in range(1 + self._waiting.pop(key, 0)):
            self._observe(config, seconds)

    def finish(self) -> Config | None:
        """See `Strategy.finish`: the subclass's `_finishing()`, asked as `ask` asks a proposal (a
        known config is observed, and the next is asked); None by default."""
        if not self._asked_base or self._queued:
            return None
        self._finish = True
        try:
            return self.ask()
        finally:
            self._finish = False

    def _finishing(self) -> Config | None:
        """What `finish` proposes; None: nothing to complete."""
        return None

    def _first(self) -> Config | None:
        """The first proposal: the base config (a subclass that must see it as its own proposal
        overrides this)."""
        return self.base

    def _space_size(self) -> tuple[int, bool]:
        """The number of distinct configs of the searched decisions, and whether it is exact
        (with very many parents of conditional decisions, a lower bound: the unconditional
        decisions' product)."""
        # Branch on the parents of conditional decisions only; multiply the others' value counts.
        required = {(stage, id) for d in self.decisions for stage, id, _ in d.requires}
        parents = [d for d in self.decisions if (d.stage, d.id) in required]
        others = [d for d in self.decisions if (d.stage, d.id) not in required]
        if prod(len(d.values) for d in parents) > MAX_PARENT_ASSIGNMENTS:
            return prod(len(d.values) for d in self.decisions if not d.requires), False

        def count(index: int, config: Config) -> int:
            if index == len(parents):
                return prod(len(d.values) for d in others if is_active(d, config))
            parent = parents[index]
            if not is_active(parent, config):
                return count(index + 1, config)
            return sum(count(index + 1, with_value(config, parent, value)) for value in parent.values)

        return count(0, self.base), True

    # -- no-op probes -------------------------------------------------------------------------

    def _probes(self) -> list[tuple[Decision, list[Config]]]:
        """Each decision's single-value changes from the base (its requirements set)."""
        base_key = config_key(self.base)
        probes = []
        for decision in self.decisions:
            configs = []
            for value in decision.values:
                if value != decision.default:
                    single = {decision.stage: {decision.id: value}}
                    config = self.normalize(merge(self.base, requirements(decision), single))
                    if config_key(config) != base_key:
                        configs.append(config)
            probes.append((decision, configs))
        return probes

    def no_ops_keys(self) -> list[tuple[str, str]]:
        """Decisions each of whose probes was told and gave the base's executable."""
        def executable(key: str) -> int | None:
            return self._executables[key][1] if key in self._executables else None

        base = executable(config_key(self.base))
        return [(d.stage, d.id) for d, keys in self._probe_keys
                if base is not None and keys and all(executable(key) == base for key in keys)]

    @property
    def no_ops(self) -> list[str]:
        return [f"{stage}.{id}" for stage, id in self.no_ops_keys()]

    # -- inert decisions ----------------------------------------------------------------------

    def _learn_executable(self, key: str, config: Config, same_as: Config | None) -> None:
        """Record the config's executable class and what it shows against every told config
        that differs from it in at most MAX_INERT_DIFF decisions."""
        known = self._executables.get(config_key(same_as)) if same_as is not None else None
        executable = known[1] if known is not None else len(self._executables)
        for other, other_executable in self._executables.values():
            differ = self.differing(config, other)
            if not differ or len(differ) > MAX_INERT_DIFF:
                continue
            if other_executable == executable:
                self._inert.update(differ)
            elif len(differ) == 1:
                self._effective.update(differ)
        self._executables[key] = (config, executable)

    def differing(self, first: Config, second: Config) -> list[tuple[str, str]]:
        """The searched decisions whose values differ between two configs (defaults filled in)."""
        a, b = merge(self.base, first), merge(self.base, second)
        return [(d.stage, d.id) for d in self.decisions if value_of(a, d) != value_of(b, d)]

    def known_inert(self) -> set[tuple[str, str]]:
        """Decisions seen not to change the executable more than INERT_ODDS times as often as
        seen to change it alone."""
        return {decision for decision, n in self._inert.items() if n > INERT_ODDS * self._effective[decision]}

    def signature(self, config: Config, inert: set[tuple[str, str]]) -> str:
        """The config's key with the `inert` decisions at their base values: two configs with one
        signature are expected to build the same executable."""
        merged = merge(self.base, config)
        for decision in self.decisions:
            if (decision.stage, decision.id) in inert:
                merged = with_value(merged, decision, value_of(self.base, decision))
        return config_key(self.normalize(merged))

    # -- conditional-aware configs ------------------------------------------------------------

    def normalize(self, config: Config) -> Config:
        """The form in which a config is asked, deduplicated and stored."""
        return self.canonical(self.drop_inactive(config))

    def drop_inactive(self, config: Config) -> Config:
        """The config without the values of conditional decisions it leaves inactive (a
        mutation of a parent can leave a child's gene behind)."""
        out = {stage: dict(values) for stage, values in config.items()}
        for decision in parents_first(self.decisions + self.inactive):
            if decision.requires and not is_active(decision, out):
                out.get(decision.stage, {}).pop(decision.id, None)
        return {stage: values for stage, values in out.items() if values}

    def active(self, config: Config | None = None) -> list[Decision]:
        """Searched decisions that are not no-ops, parents first; with a config, only those
        active in it."""
        no_ops = set(self.no_ops_keys())
        return [d for d in self.decisions if (d.stage, d.id) not in no_ops
                and (config is None or is_active(d, merge(self.base, config)))]

    def sample(self, keep_base: float = 0.0) -> Config:
        """A random config: each active decision takes a uniform value, or keeps its base value
        with probability `keep_base`; a conditional decision only once its parents allow it."""
        config = self.base
        for decision in self.active():
            if decision.requires and not is_active(decision, config):
                continue
            if self.rng.random() >= keep_base:
                config = with_value(config, decision, self.rng.choice(decision.values))
        return config

    def mutate(self, config: Config) -> Config:
        """The config with one active decision set to another of its values (the config itself
        when no decision has another value); a decision known inert only when no other is left."""
        choices = [d for d in self.active(config) if len(d.values) > 1]
        inert = self.known_inert()
        choices = [d for d in choices if (d.stage, d.id) not in inert] or choices
        if not choices:
            return config
        decision = self.rng.choice(choices)
        current = value_of(config, decision)
        return with_value(config, decision, self.rng.choice([v for v in decision.values if v != current]))

    def neighbours(self, config: Config, decision: Decision) -> Iterator[Config]:
        """The config with `decision` set to each of its other values."""
        current = value_of(config, decision)
        for value in decision.values:
            if value != current:
                yield with_value(config, decision, value)

    def crossover(self, first: Config, second: Config) -> Config:
        """Uniform crossover: each decision's value from one parent or the other, parents first,
        so a conditional gene is taken only when the child's genes so far make it active."""
        child = self.base
        for decision in self.decisions:
            if is_active(decision, child):
                donor = first if self.rng.random() < 0.5 else second
                child = with_value(child, decision, value_of(donor, decision))
        return child
