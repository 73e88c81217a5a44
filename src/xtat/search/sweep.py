"""The default strategy: the base config, one decision at a time, the helpful ones combined, then random.

The sweep is breadth first: every global decision's first value, then every
global decision's second, and so on, so a short budget covers every decision
before it spends probes on a multi-valued option's other values; the per-op
decisions (search.order) follow the same way. A process setup's probe (a runtime
decision: each try starts processes) waits while such probes have taken longer
than the others so far, so the setups get about half the sweep's time until the
other global decisions run out (and still come before any per-op decision).

It is also the no-op probe list: a decision none of whose values changes the
executable (every probe came back the same executable as the base) is reported
in `no_ops` and left out of the random phase.

Wins of separate decisions often add up, and a budget spent on the sweep alone
never tries them together. So helpful single changes are combined greedily: each
is added to the best combination so far, and the combination is kept when it got
faster. A clear win (faster than the base beyond the tie margin) joins as soon as
it is seen, before the sweep goes on: a short budget that ends inside the sweep
(quick effort ends among the global decisions) still ends with its clear wins
combined, where the ceiling's best usually lies (the CPU count with a pass or an
option). Once every global decision is swept, the global changes that were faster
only within the margin are tried the same way, fastest first, before any per-op
probe: a 1-2% option on top of the CPU count is where a ceiling's last few
percent often lie, and a standard budget can end among the per-op probes (at
7e46721 Haiku's spent its last 22 trials on dot layouts, none faster, and never
tried one CPU with `cpu-parallel-task-assigner` off or two host devices, each
1.02x alone). The per-op changes within the margin join after the whole sweep. A
decision's value found faster later in the sweep is tried in place of the one
combined.

The random phase keeps each decision at its base value half of the time (XLA's
defaults are usually good, and configs near them compile and verify more often).
"""

from __future__ import annotations

from typing import Any

from xtat.core.space import Config, Decision, config_key, merge
from xtat.search.base import SearchStrategy, requirements, value_of
from xtat.search.order import SETUP_STAGE, TIE_MARGIN, is_per_op


def breadth_first(probes: list[tuple[Decision, list[Config]]]) -> list[Config]:
    """The global decisions' probes, every decision's first value before any decision's second (a
    short budget covers every decision, a multi-valued option's other values come later), then the
    per-op decisions' the same way: a knob's second value comes before any per-op decision's first."""
    swept: list[Config] = []
    for part in ([p for p in probes if not is_per_op(p[0])], [p for p in probes if is_per_op(p[0])]):
        depth = max((len(configs) for _, configs in part), default=0)
        swept += [configs[i] for i in range(depth) for _, configs in part if i < len(configs)]
    return swept


class SweepThenRandom(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options: Any) -> None:
        super().__init__(decisions, **options)
        self._sweep = breadth_first(self.probes)  # taken in order, but for `_next_probe`'s balance
        self._setup_probes = {config_key(c) for d, configs in self.probes if d.stage == SETUP_STAGE for c in configs}
        self._per_op_probes = {config_key(c) for d, configs in self.probes if is_per_op(d) for c in configs}
        self._probe_keys_all = {config_key(c) for _, configs in self.probes for c in configs}
        self._probe_spent = {True: 0.0, False: 0.0}  # told probes' seconds: those of a process setup, the rest
        self._swept = False
        # Decisions combined, each with its single change's seconds: a faster value of one, probed
        # later (the sweep is breadth first), is tried in its place.
        self._combined: dict[tuple[str, str], float] = {}
        self._best: tuple[Config, float] | None = None  # the best combination so far
        # The combination asked and not yet told, and the single change it adds (config, seconds).
        self._trying: tuple[Config, tuple[Config, float]] | None = None

    def _propose(self) -> Config | None:
        combination = self._combine(clear_only=not self._swept, per_op=self._swept)
        if combination is None and not self._swept and self._globals_swept():
            combination = self._combine(clear_only=False, per_op=False)
        if combination is not None:
            return combination
        probe = self._next_probe()
        if probe is not None:
            return probe
        if not self._swept:  # the changes within the margin join now
            self._swept = True
            return self._propose()
        return self.sample(keep_base=0.5)

    def _finishing(self) -> Config | None:
        """A clear win told last, not yet combined with the best combination so far: a short budget
        that ends right after one still ends with its clear wins combined (BlackJAX's quick run at
        4482b5a timed copy insertion's region analysis, 1.20x, as its time ran out, and never with
        one CPU, 1.21x; the two together were the ceiling's config, 1.39x)."""
        return self._combine(clear_only=True, per_op=self._swept)

    def _globals_swept(self) -> bool:
        """Whether only per-op probes are left of the sweep."""
        return all(config_key(c) in self._per_op_probes for c in self._sweep)

    def _next_probe(self) -> Config | None:
        """The sweep's next probe in its order, except that a process setup's (a runtime decision:
        each try starts fresh pairs of processes, 6-41x a compile-only try's time in the campaign
        at 6667987) waits while such probes have taken longer than the others, or one is in flight:
        a short budget is not spent on setups that rank first while options that rank just below
        them, each a compile, go untried (at 6667987 the ResNet step's quick run spent 30 s of its
        40 on `cpus=1` and `host_devices=2` and never reached `algsimp` off, its 5.9x)."""
        if not self._sweep:
            return None
        setups_ahead = (self._probe_spent[True] > self._probe_spent[False]
                        or any(key in self._setup_probes for key in self._pending))
        for index, config in enumerate(self._sweep):
            key = config_key(config)
            if key in self._per_op_probes:
                break  # only setups are left of the global decisions: they come before any per-op one
            if not (setups_ahead and key in self._setup_probes):
                return self._sweep.pop(index)
        return self._sweep.pop(0)

    def tell(self, config: Config, seconds: float | None, same_as: Config | None = None,
             spent_s: float | None = None) -> None:
        key = config_key(config)
        if spent_s is not None and key in self._probe_keys_all and key in self._pending:
            self._probe_spent[key in self._setup_probes] += spent_s
        super().tell(config, seconds, same_as, spent_s)

    def _observe(self, config: Config, seconds: float | None) -> None:
        if self._trying is not None and config_key(config) == config_key(self._trying[0]):
            single = self._trying[1]
            self._trying = None
            assert self._best is not None
            # The best of the combination, the best before it and the change on its own.
            timed = [self._best, single] + ([(config, seconds)] if seconds is not None else [])
            self._best = min(timed, key=lambda t: t[1])

    def _combine(self, clear_only: bool, per_op: bool) -> Config | None:
        """The next greedy combination to measure, or None (none is left, or one is in flight);
        `per_op`: the per-op decisions' changes may join too."""
        if self._trying is not None:
            return None
        for seconds, decision, change in self._helpful_changes(clear_only, per_op):
            if decision in self._combined and self._combined[decision] <= seconds:
                continue
            self._combined[decision] = seconds
            single = (self.normalize(merge(self.base, change)), seconds)
            if self._best is None:
                self._best = single  # a probe: measured already
                continue
            combination = self.normalize(merge(self._best[0], change))
            self._trying = (combination, single)
            return combination  # known already: `ask` tells it at once
        return None

    def _helpful_changes(self, clear_only: bool, per_op: bool) -> list[tuple[float, tuple[str, str], Config]]:
        """Per decision that is not a no-op, its fastest single change that beat the base, fastest
        first: beyond the tie margin when `clear_only` (a clear win joins as soon as one value shows
        it, its other values may be probed later), else among all its values once all were told, and
        of the global decisions only unless `per_op`."""
        base_s = self.results.get(config_key(self.base))
        if base_s is None:
            return []
        bound = base_s / (1.0 + TIE_MARGIN) if clear_only else base_s
        best: list[tuple[float, tuple[str, str], Config]] = []
        no_ops = set(self.no_ops_keys())  # faster only by noise: the executable was the base's
        for decision, configs in self.probes:
            told = [c for c in configs if config_key(c) in self.results]
            if (decision.stage, decision.id) in no_ops or not told or (not clear_only and len(told) < len(configs)):
                continue
            if not clear_only and not per_op and is_per_op(decision):
                continue
            timed = [(s, c) for c in told if (s := self.results[config_key(c)]) is not None and s < bound]
            if timed:
                seconds, config = min(timed, key=lambda t: t[0])
                change = merge(requirements(decision), {decision.stage: {decision.id: value_of(config, decision)}})
                best.append((seconds, (decision.stage, decision.id), change))
        return sorted(best, key=lambda t: t[0])
