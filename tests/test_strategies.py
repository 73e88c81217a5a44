"""Search strategies: a synthetic space with a known optimum driven by a FakeBuilder
(a function from config to seconds, no compiling), and each strategy end to end on a
real tiny workload."""

from __future__ import annotations

import itertools
import json
import sqlite3

import pytest

import xtat
from doubles import FakeRunner, fake_runner_factory
from records import ended
from tiny import FAST, tiny_mlp
from xtat.core.errors import UserError
from xtat.core.space import Config, Decision, Space, config_key, is_active
from xtat.search import STRATEGIES, make_strategy
from xtat.search.base import SearchStrategy
from xtat.search.sweep import breadth_first

A = Decision("codegen", "a", (0, 1, 2, 3), 0)
B = Decision("codegen", "b", (0, 1, 2, 3), 0)
C = Decision("codegen", "c", (False, True), False)
D = Decision("codegen", "d", ("x", "y", "z"), "x")
E = Decision("codegen", "e", (0, 1, 2, 3), 0)
P = Decision("passes", "p", (False, True), False)
Q = Decision("program", "q", (0, 1, 2, 3), 0, requires=(("passes", "p", True),))  # active only with p
DECISIONS = [A, B, C, D, E, P, Q]
SPACE = Space(tuple(DECISIONS))


def _value(config: Config, decision: Decision) -> object:
    return config.get(decision.stage, {}).get(decision.id, decision.default)


def fake_builder(config: Config) -> float | None:
    """FakeBuilder: seconds of a config, None when it fails to compile (e = 3).

    Mostly separable, with an interaction (c helps only together with d = "y") and a
    conditional decision q that only counts when p is on.
    """
    if _value(config, E) == 3:
        return None
    seconds = [1.0, 0.9, 0.8, 0.95][_value(config, A)] * [1.0, 0.95, 1.05, 0.85][_value(config, B)]
    seconds *= {"x": 1.0, "y": 0.97, "z": 1.02}[_value(config, D)]
    if _value(config, C):
        seconds *= 0.9 if _value(config, D) == "y" else 1.1
    seconds *= [1.0, 0.98, 0.96][_value(config, E)]
    if _value(config, P):
        seconds *= 0.99 * [1.0, 0.92, 0.82, 0.88][_value(config, Q)]
    return seconds


def _all_configs(decisions: list[Decision]) -> list[Config]:
    """Every distinct config of the space, enumerated independently of the strategies."""
    unconditional = [d for d in decisions if not d.requires]
    configs = {}
    for values in itertools.product(*(d.values for d in unconditional)):
        config: Config = {}
        for decision, value in zip(unconditional, values):
            config.setdefault(decision.stage, {})[decision.id] = value
        children = [d for d in decisions if d.requires and is_active(d, config)]
        for child_values in itertools.product(*(d.values for d in children)):
            full = {stage: dict(ids) for stage, ids in config.items()}
            for decision, value in zip(children, child_values):
                full.setdefault(decision.stage, {})[decision.id] = value
            canonical = SPACE.canonical(full)
            configs[config_key(canonical)] = canonical
    return list(configs.values())


ALL = _all_configs(DECISIONS)
OPTIMUM = min(s for s in map(fake_builder, ALL) if s is not None)
NEAR_OPTIMUM = [c for c in ALL if (s := fake_builder(c)) is not None and s <= 1.05 * OPTIMUM]


def _strategy(name: str, seed: int = 0, budget: int | None = None, decisions: list[Decision] = DECISIONS,
              base: Config | None = None, canonical=None) -> SearchStrategy:
    return make_strategy(name, decisions, seed=seed, base=base or {}, budget=budget,
                         canonical=canonical or Space(tuple(decisions)).canonical, searchable=lambda stage, id: True)


def _drive(strategy: SearchStrategy, budget: int, builder=fake_builder) -> list[tuple[Config, float | None]]:
    """Ask and tell until the budget is spent or the strategy is done; the (config, seconds) asked."""
    history = []
    while len(history) < budget and (config := strategy.ask()) is not None:
        seconds = builder(config)
        strategy.tell(config, seconds)
        history.append((config, seconds))
    return history


def _trials_to_near_optimum(history: list[tuple[Config, float | None]]) -> int | None:
    return next((i + 1 for i, (_, s) in enumerate(history) if s is not None and s <= 1.05 * OPTIMUM), None)


def test_the_synthetic_space_is_what_the_tests_assume():
    assert len(ALL) == 4 * 4 * 2 * 3 * 4 * (1 + 4)
    assert OPTIMUM == pytest.approx(0.8 * 0.85 * 0.97 * 0.9 * 0.96 * 0.99 * 0.82)
    # Random search needs len(ALL) / len(NEAR_OPTIMUM) trials on average to get within 5%.
    assert len(ALL) / len(NEAR_OPTIMUM) == 640


# Budgets for seed 0: each is well under a tenth of random search's expected 640 trials.
@pytest.mark.parametrize("name, budget", [("coordinate", 40), ("anneal", 60), ("evolution", 40), ("tpe", 60)])
def test_strategy_reaches_the_optimum_far_sooner_than_random(name, budget):
    history = _drive(_strategy(name, budget=budget), budget)
    reached = _trials_to_near_optimum(history)
    assert reached is not None, (name, min(s for _, s in history if s is not None))
    assert history[0][0] == {}  # the base config first
    assert _trials_to_near_optimum(_drive(_strategy("random", budget=budget), budget)) is None
    assert budget * 10 < len(ALL) / len(NEAR_OPTIMUM)


def test_coordinate_descent_stops_at_a_local_optimum_it_has_verified():
    history = _drive(_strategy("coordinate"), 1000)
    best = min(s for _, s in history if s is not None)
    assert best == OPTIMUM  # this space has no local optimum for one-at-a-time moves
    assert len(history) < 60  # it stopped: a full pass from the optimum moved nothing


def test_grid_enumerates_every_distinct_config_once_and_finds_the_optimum():
    small = [A, C, D, P, Q]
    grid = _strategy("grid", decisions=small, budget=200)
    assert grid.space_size == (4 * 2 * 3 * (1 + 4), True)
    history = _drive(grid, 1000)
    keys = [config_key(c) for c, _ in history]
    assert sorted(keys) == sorted(config_key(c) for c in _all_configs(small))
    assert min(s for _, s in history if s is not None) == min(s for c in _all_configs(small)
                                                               if (s := fake_builder(c)) is not None)


def test_grid_refuses_a_space_larger_than_the_budget_or_the_limit():
    with pytest.raises(UserError, match=r"has 1920 configs, more than the budget of 100; use --strategy"):
        _strategy("grid", budget=100)
    wide = [Decision("codegen", f"o{i}", (0, 1, 2), 0) for i in range(10)]
    with pytest.raises(UserError, match=r"has 59049 configs, more than the grid limit of 4096"):
        _strategy("grid", decisions=wide)
    # Parents of 20 conditional decisions: counted from below, not enumerated.
    parents = [Decision("passes", f"p{i}", (False, True), False) for i in range(20)]
    children = [Decision("program", f"c{i}", (0, 1), 0, requires=(("passes", f"p{i}", True),)) for i in range(20)]
    with pytest.raises(UserError, match=r"has at least 1048576 configs"):
        _strategy("grid", decisions=parents + children, budget=10_000)


@pytest.mark.parametrize("name", STRATEGIES)
def test_conditional_genes_are_never_set_while_inactive(name):
    # Without canonicalisation, so that what the strategy itself proposes is checked.
    history = _drive(_strategy(name, budget=2000, canonical=lambda config: config), 40)
    assert len(history) >= 20
    assert all("q" not in c.get("program", {}) or c.get("passes", {}).get("p") is True for c, _ in history)
    assert any("q" in c.get("program", {}) for c, _ in history)  # the conditional decision was searched


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_resumed_search_continues_the_same_search(name):
    budget = 20
    uninterrupted = [c for c, _ in _drive(_strategy(name, budget=2000), budget)]
    # The first run stops after 8 trials; the resumed run re-asks, is told the recorded
    # results back (as the tuner does from the store), and measures only what is new.
    recorded = {config_key(c): s for c, s in _drive(_strategy(name, budget=2000), 8)}
    resumed, asked = _strategy(name, budget=2000), []
    while len(asked) < budget and (config := resumed.ask()) is not None:
        key = config_key(config)
        resumed.tell(config, recorded[key] if key in recorded else fake_builder(config))
        asked.append(config)
    assert asked == uninterrupted
    assert [config_key(c) for c in asked[:8]] == list(recorded)
    if name not in ("grid", "coordinate"):  # chance plays a part: another seed searches elsewhere
        # (sweep's sweep and combination phases are deterministic: its random phase comes later)
        longer = 2 * budget if name == "sweep" else budget
        assert ([c for c, _ in _drive(_strategy(name, seed=1, budget=2000), longer)]
                != [c for c, _ in _drive(_strategy(name, budget=2000), longer)])


def _often_failing_builder(config: Config) -> float | None:
    """FakeBuilder whose failures include the fastest value of a decision (a = 2)."""
    return None if _value(config, A) == 2 or _value(config, D) == "z" else fake_builder(config)


@pytest.mark.parametrize("name", STRATEGIES)
def test_failed_configs_never_become_the_incumbent(name):
    strategy = _strategy(name, budget=2000)
    failed = []
    for config, seconds in _drive(strategy, 40, _often_failing_builder):
        if seconds is None:
            failed.append(config)
        assert strategy.incumbent is not None and strategy.incumbent[0] not in failed
    assert failed  # the FakeBuilder's failing configs were asked, and told as failures
    told = [s for s in strategy.results.values() if s is not None]
    assert strategy.incumbent[1] == min(told)


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_later_stage_searches_around_the_frozen_earlier_stage(name):
    # Stage formulation: the first stage's best is frozen into the base of the second.
    # As in the tuner, configs are canonicalised by the space of every stage so far.
    first = _strategy(name, decisions=[P], budget=40, canonical=SPACE.canonical)
    _drive(first, 4)
    frozen = first.incumbent[0]
    assert frozen == {"passes": {"p": True}}
    second = _strategy(name, decisions=[A, Q], base=frozen, budget=40, canonical=SPACE.canonical)
    history = _drive(second, 40)
    assert history[0][0] == frozen
    assert all(c.get("passes") == {"p": True} for c, _ in history)
    assert {c.get("program", {}).get("q", 0) for c, _ in history} == {0, 1, 2, 3}
    # A conditional decision whose parent is not searchable in this stage is reported, not searched.
    later = make_strategy(name, [A, Q], seed=0, base={}, canonical=SPACE.canonical, budget=40,
                          searchable=lambda stage, id: stage != "passes")
    assert later.inactive == [Q]
    assert all("program" not in c for c, _ in _drive(later, 8))


def test_no_op_decisions_are_reported_and_left_out():
    strategy = _strategy("sweep", budget=100)
    for _ in range(60):
        config = strategy.ask()
        # b never changes the executable: each probe of it (b alone changed) gives the base's.
        same = config != {} and set(config) == {"codegen"} and set(config["codegen"]) == {"b"}
        strategy.tell(config, fake_builder(config), same_as={} if same else None)
    assert strategy.no_ops == ["codegen.b"]
    assert B not in strategy.active()
    later = [strategy.ask() for _ in range(20)]
    assert all("b" not in config.get("codegen", {}) for config in later)  # left out of the random phase


def test_sweep_is_breadth_first_and_combines_each_clear_win_as_soon_as_a_value_shows_it():
    strategy = _strategy("sweep")
    probes = sum(len(configs) for _, configs in strategy.probes)
    history = _drive(strategy, 1 + probes + 8)
    asked = [SPACE.canonical(config) for config, _ in history]
    single = [c for c in asked[1:] if len({(st, i) for st, ids in c.items() for i in ids} - {("passes", "p")}) == 1
              or c == {"passes": {"p": True}}]
    # Every global decision's first value before any one's second: a short budget covers them all;
    # then the per-op q's (a program decision that is not a declared knob).
    firsts = [SPACE.canonical(configs[0]) for decision, configs in strategy.probes if decision.id != "q"]
    assert single[:len(firsts)] == firsts
    per_op = [i for i, c in enumerate(single) if "program" in c]
    assert per_op and min(per_op) > max(i for i, c in enumerate(single) if "program" not in c)
    assert breadth_first(strategy.probes)[:len(firsts)] == firsts
    # a=1 (10% faster) is the best so far; b=1 (5%) joins it at once, before c is probed.
    after_b = asked.index(SPACE.canonical({"codegen": {"b": 1}})) + 1
    assert asked[after_b] == SPACE.canonical({"codegen": {"a": 1, "b": 1}})
    assert asked[after_b + 1] == SPACE.canonical({"codegen": {"c": True}})
    # a=2 (20%), probed in the second round, takes a=1's place in the combination right away.
    after_a2 = asked.index(SPACE.canonical({"codegen": {"a": 2}})) + 1
    assert asked[after_a2]["codegen"]["a"] == 2 and asked[after_a2]["codegen"]["b"] == 1
    # So do b=3 and q=2 later: the combination ends with each decision's best value.
    combined = {"codegen": {"a": 2, "b": 3, "d": "y", "e": 2}, "passes": {"p": True}, "program": {"q": 2}}
    assert SPACE.canonical(combined) in asked
    assert min(s for _, s in history if s is not None) <= fake_builder(combined) * (1 + 1e-9)
    # c alone is 10% slower (without d=y): it is never combined.
    greedy = asked[:asked.index(SPACE.canonical(combined)) + 1]
    assert all(not c.get("codegen", {}).get("c") for c in greedy if len(c.get("codegen", {})) > 1)


def test_sweep_combines_global_changes_within_the_margin_before_any_per_op_probe():
    unroll = Decision("program", "scan@3", (1, 2), 1)  # a per-op decision: after every global one

    def seconds(config: Config) -> float | None:  # FakeBuilder: unroll 2 is 1% faster, inside the margin
        plain = fake_builder(config)
        return None if plain is None else plain * (0.99 if _value(config, unroll) == 2 else 1.0)

    strategy = _strategy("sweep", decisions=[P, A, C, unroll])
    probes = sum(len(configs) for _, configs in strategy.probes)
    asked = [config for config, _ in _drive(strategy, 1 + probes + 2, seconds)]
    swept = [c for c in breadth_first(strategy.probes) if "program" not in c]
    assert asked[:1 + len(swept)] == [{}, *swept]
    # p is 1% faster and a=2 20%: p joins a=2 once the global decisions are swept, before the
    # per-op probe; the per-op change within the margin joins only after the whole sweep.
    assert asked[1 + len(swept):] == [{"codegen": {"a": 2}, "passes": {"p": True}}, {"program": {"scan@3": 2}},
                                      {"codegen": {"a": 2}, "passes": {"p": True}, "program": {"scan@3": 2}}]


def test_sweep_keeps_process_setups_to_the_time_the_other_decisions_had():
    """A runtime decision's try starts processes (here 10 s against 1 s a compile): after one, the
    next waits until the compile-only probes have taken as long, though it ranks above them; told
    no cost, the sweep keeps its order."""
    cpus, devices = Decision("runtime", "cpus", (0, 1), 0), Decision("runtime", "host_devices", (0, 2), 0)
    unroll = Decision("program", "scan@3", (1, 2), 1)  # a per-op decision: after every global one

    def asked(costs: bool, decisions: list[Decision]) -> list[Config]:
        strategy = _strategy("sweep", decisions=decisions, budget=40)
        order = []
        for _ in range(1 + sum(len(configs) for _, configs in strategy.probes)):
            config = strategy.ask()
            order.append(config)
            setup = "runtime" in config
            strategy.tell(config, 1.0, spent_s=(10.0 if setup else 1.0) if costs else None)
        return order

    balanced = asked(True, [cpus, devices, A, B, C, E])
    assert balanced[1] == {"runtime": {"cpus": 1}}  # the first setup ranks first and goes first
    second = balanced.index({"runtime": {"host_devices": 2}})
    assert second == 2 + 10  # after ten 1-s compiles, as long as the first setup took
    assert all("runtime" not in c for c in balanced[2:second])
    plain = asked(False, [cpus, devices, A, B, C, E])
    assert plain[1:3] == [{"runtime": {"cpus": 1}}, {"runtime": {"host_devices": 2}}]
    # With fewer compiles than the setup took, the second setup still comes before a per-op decision.
    few = asked(True, [cpus, devices, C, unroll])
    assert few[1:] == [{"runtime": {"cpus": 1}}, {"codegen": {"c": True}}, {"runtime": {"host_devices": 2}},
                       {"program": {"scan@3": 2}}]


# A space where only three of ten decisions change the executable: the rest are inert, as many
# XLA options are on a given program. FakeBuilder: the executable is the effective decisions' values.
EFFECTIVE = [Decision("codegen", f"e{i}", (0, 1, 2, 3), 0) for i in range(3)]
INERT = [Decision("codegen", f"i{i}", (0, 1, 2), 0) for i in range(7)]


def _inert_space_builder(config: Config) -> tuple[tuple, float]:
    """FakeBuilder over EFFECTIVE + INERT: (executable, seconds); e0 = e1 = e2 = 2 is fastest."""
    executable = tuple(_value(config, d) for d in EFFECTIVE)
    return executable, 1.0 + sum(abs(v - 2) for v in executable) * 0.1


def _duplicates_asked(name: str, seed: int, hint: bool, budget: int = 40) -> int:
    """Configs asked that rebuilt an executable already built, told `same_as` (hint) or not."""
    strategy = _strategy(name, seed=seed, budget=budget, decisions=EFFECTIVE + INERT)
    first_with: dict[tuple, Config] = {}
    duplicates = 0
    for _ in range(budget):
        config = strategy.ask()
        if config is None:
            break
        executable, seconds = _inert_space_builder(config)
        earlier = first_with.setdefault(executable, config)
        duplicates += earlier is not config
        strategy.tell(config, seconds, same_as=earlier if hint and earlier is not config else None)
    return duplicates


@pytest.mark.parametrize("name", ["evolution", "model", "anneal"])
def test_inert_decisions_learned_from_duplicates_are_mutated_last(name):
    with_hint = sorted(_duplicates_asked(name, seed, True) for seed in range(3))
    without = sorted(_duplicates_asked(name, seed, False) for seed in range(3))
    assert with_hint[1] < without[1], (with_hint, without)


def test_a_decision_is_inert_while_seen_inert_over_twice_as_often_as_effective():
    strategy = _strategy("random", decisions=EFFECTIVE + INERT)
    base = strategy.ask()
    strategy.tell(base, 1.0)
    i0, e0 = {"codegen": {"i0": 1}}, {"codegen": {"e0": 1}}
    strategy.tell(i0, 1.0, same_as=base)
    assert strategy.known_inert() == {("codegen", "i0")}
    both = {"codegen": {"i0": 1, "i1": 2}}
    strategy.tell(both, 1.0, same_as=base)  # two differ from the base, one from i0: both seen inert
    assert strategy.known_inert() == {("codegen", "i0"), ("codegen", "i1")}
    strategy.tell(e0, 0.9)  # a new executable, one decision from the base: e0 is effective
    strategy.tell({"codegen": {"e0": 1, "i0": 1}}, 0.9, same_as=e0)
    assert strategy.known_inert() == {("codegen", "i0"), ("codegen", "i1")}
    strategy.tell({"codegen": {"i1": 1}}, 0.8)  # i1 alone changed the executable: seen inert 2, effective 1
    assert strategy.known_inert() == {("codegen", "i0")}
    mutations = [strategy.mutate({}) for _ in range(50)]
    assert all("i0" not in m["codegen"] for m in mutations)  # others are left: i0 is mutated last


def test_an_unknown_strategy_is_refused_with_the_names():
    with pytest.raises(UserError, match="--strategy 'nope': choose one of sweep, random, grid"):
        _strategy("nope")


# -- real XLA ---------------------------------------------------------------------------------

OPTIONS = ("xla_cpu_opt_preset", "xla_llvm_disable_expensive_passes", "xla_cpu_prefer_vector_width")


# Every strategy through the tuner, on FakeRunner (a test double: real stages and store, no workers);
# sweep, the default, and tpe run on real workers throughout the other tests.
@pytest.mark.parametrize("name", [name for name in STRATEGIES if name != "sweep"])
def test_strategy_drives_the_tuner(db, name):
    # grid must cover its space within the budget: two binary options (4 configs)
    options = OPTIONS[:2] if name == "grid" else OPTIONS
    settings = {**FAST, "finalists": 1, "rounds": 3, "samples": 3}
    result = xtat.tune(tiny_mlp(), db=db, budget=4, options=options, stages=("codegen",), strategy=name,
                       runner=fake_runner_factory(FakeRunner(lambda candidate: 1e-3)), **settings)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT config_key, status FROM trials ORDER BY id").fetchall()
    assert len(rows) == 4 and rows[0][0] == "{}"
    assert len({key for key, _ in rows}) == 4  # no config measured twice
    assert all(status in ("ok", "duplicate", "wrong_result", "compile_error") for _, status in rows)
    assert [event.config for event in result.history][0] == {}
    assert sum(result.trials.values()) == 4


def test_a_resumed_tuning_run_continues_the_same_search(db):
    settings = {**FAST, "finalists": 1, "rounds": 3, "samples": 3}
    first = xtat.tune(tiny_mlp(), db=db, budget=3, options=OPTIONS, stages=("codegen",), strategy="tpe", **settings)
    longer = xtat.tune(tiny_mlp(), db=db, budget=5, options=OPTIONS, stages=("codegen",), strategy="tpe", **settings)
    assert [e.config for e in longer.history[:3]] == [e.config for e in first.history]
    assert [e.resumed for e in longer.history] == [True, True, True, False, False]
    assert longer.new_trials == 2


def test_staged_formulation_with_a_model_based_strategy(db):
    # tpe asks Optuna define-by-run: each stage is a new study around the frozen earlier stage.
    settings = {**FAST, "finalists": 1, "rounds": 3, "samples": 3}
    result = xtat.tune(tiny_mlp(), db=db, budget=6, stages=("program", "codegen"), formulation="staged",
                       options=OPTIONS[:2], strategy="tpe", **settings)
    configs = [event.config for event in result.history]
    # At most the budget: a codegen option found to be a no-op is dropped, and its stage may end early.
    assert configs[0] == {} and 4 <= len(configs) <= 6
    program_stage = [c for c in configs if "codegen" not in c]
    codegen_stage = [c for c in configs if "codegen" in c]
    assert len(program_stage) == 3 and codegen_stage  # the default, the program stage's share, then codegen
    frozen = {stage: ids for stage, ids in codegen_stage[0].items() if stage != "codegen"}
    assert frozen in program_stage  # the program stage's best, frozen
    assert all({stage: ids for stage, ids in c.items() if stage != "codegen"} == frozen for c in codegen_stage)


# -- the search order (search.order) -------------------------------------------------------------

def test_global_decisions_come_first_ranked_by_how_often_their_kind_won(tmp_path):
    from xtat.search.order import WinCounts, counted, ordered
    from xtat.store.sql import Store

    decisions = [
        Decision("program", "dot@0/1:f32[8,8],f32[8,8]", ("default", "transposed"), "default"),
        Decision("program", "knob:chunks", (1, 2), 1),
        Decision("passes", "cse", (False, True), False),
        Decision("passes", "algsimp", (False, True), False),
        Decision("codegen", "xla_backend_optimization_level", (1, 2, 3), 3),
    ]
    # No evidence: the stages' order, global ones (declared knobs among them) before the per-op dot.
    assert [d.id for d in ordered(decisions, WinCounts())] == [
        "knob:chunks", "cse", "algsimp", "xla_backend_optimization_level", "dot@0/1:f32[8,8],f32[8,8]"]
    # A store where algsimp off won on one workload (a paired interval above the tie margin) and cse
    # was tried without winning: algsimp first, cse below the kinds never tried.
    store = Store.open(tmp_path / "wins.db")
    workload = store.upsert_workload("fp", "program", "w", {"platform": "cpu"}, {})
    for config, low in (({}, 1.0), ({"passes": {"algsimp": True}}, 1.3), ({"passes": {"cse": True}}, 0.9)):
        trial = store.start_trial(workload, None, config, config_key(config))
        store.finish_trial(trial, ended("ok", median_s=1e-3, speedup=(low + 0.05, low, low + 0.1)))
    counts = counted([store])
    assert counts.wins == {"passes.algsimp": 1} and counts.tries == {"passes.algsimp": 1, "passes.cse": 1}
    assert [d.id for d in ordered(decisions, counts)][:4] == [
        "algsimp", "knob:chunks", "xla_backend_optimization_level", "cse"]
    assert ordered(decisions, counts)[-1].stage == "program"  # the per-op dot stays last


def test_the_shipped_prior_is_vetted_and_a_bad_one_is_refused_naming_it():
    from xtat.search.order import read_prior, shipped

    assert shipped().workloads > 0 and all(v > 0 for v in shipped().wins.values())
    good = {"name": "w", "fingerprint": "fp", "won": ["passes.cse"], "tried": None}
    for bad in ({"workloads": [{**good, "won": [1]}]}, {"workloads": [{**good, "tried": "passes.cse"}]},
                {"workloads": [{**good, "name": "", "fingerprint": ""}]}, {"workloads": [{**good, "extra": 1}]},
                {"workloads": good}, {"workloads": [good], "wins": {}}, []):
        with pytest.raises(ValueError, match="prior.json"):
            read_prior(bad, "prior.json")
    assert read_prior({"workloads": [good]}, "prior.json")[0].won == {"passes.cse"}
    # A kind that won was tried, whatever the record's "tried" says: its rate can never exceed 1.
    from xtat.search.order import tally

    omits = read_prior({"workloads": [{**good, "tried": ["passes.algsimp"]}]}, "prior.json")
    assert tally(omits).tries == {"passes.algsimp": 1, "passes.cse": 1}


def test_a_run_never_learns_its_order_from_its_own_programs_record(tmp_path):
    """Leave one out: the prior's record of the program being tuned (by fingerprint; a report's row,
    which has none, by name) is left out, so a campaign over the programs the prior was built from
    measures each with what the others taught."""
    from xtat.search.order import SHIPPED, WorkloadWins, read_prior, recorded, shipped, tally
    from xtat.store.sql import Store

    store = Store.open(tmp_path / "campaign.db")
    copy_insertion = {"codegen": {"xla_cpu_copy_insertion_use_region_analysis": True}}
    for fingerprint, name, won in (("fp-a", "a:make", copy_insertion), ("fp-b", "b:make", {"passes": {"cse": True}})):
        workload = store.upsert_workload(fingerprint, "program", name, {"platform": "cpu"}, {})
        for config, low in (({}, 1.0), (won, 1.3)):
            trial = store.start_trial(workload, None, config, config_key(config))
            store.finish_trial(trial, ended("ok", median_s=1e-3, speedup=(low + 0.05, low, low + 0.1)))
    records = recorded([store, store])  # one program in two stores is one workload
    records.append(WorkloadWins("suite/x", "", frozenset({"passes.algsimp"}), None))
    assert len(records) == 3
    assert tally(records).wins == {"codegen.xla_cpu_copy_insertion_use_region_analysis": 1, "passes.cse": 1,
                                   "passes.algsimp": 1}
    assert tally(records, "fp-a").wins == {"passes.cse": 1, "passes.algsimp": 1}
    assert tally(records, "fp-other", "suite/x").wins == {
        "codegen.xla_cpu_copy_insertion_use_region_analysis": 1, "passes.cse": 1}
    assert tally(records, "fp-other", "suite/x").workloads == 0 and tally(records).workloads == 1
    # The shipped prior holds records with fingerprints; each one's own program does not see it.
    mine = next(r for r in read_prior(json.loads(SHIPPED.read_text()), "shipped") if r.fingerprint and r.won)
    without = shipped(mine.fingerprint, mine.name)
    assert all(without.wins.get(k, 0) == shipped().wins[k] - 1 for k in mine.won)


def test_effort_levels_are_presets_that_explicit_settings_override():
    from xtat.tuning.settings import DECIDE_SHARE, EFFORTS, Effort, TuneSettings

    quick, standard = TuneSettings.at("quick"), TuneSettings.at(Effort.STANDARD)
    assert quick.time_s is not None and standard.run_time_s == 300.0  # standard's 5 minutes are the whole call's
    assert quick.time_s < (1 - DECIDE_SHARE) * standard.run_time_s and quick.finalists < standard.finalists
    assert quick.confirm_time_s < standard.confirm_time_s and TuneSettings.at("exhaustive").budget == 1000
    assert TuneSettings.at("quick", time_s=10.0, seed=3).time_s == 10.0 and set(EFFORTS) == set(Effort)
    # An asked search size replaces standard's whole-call limit; other settings keep it.
    assert TuneSettings.at("standard", time_s=600.0).run_time_s is None
    assert TuneSettings.at("standard", budget=1000).run_time_s is None
    assert TuneSettings.at("standard", seed=3, confirm_time_s=10.0).run_time_s == 300.0
    with pytest.raises(UserError, match="--effort 'fast': choose one of quick, standard, exhaustive"):
        TuneSettings.at("fast")


@pytest.mark.parametrize("name", STRATEGIES)
def test_queued_configs_are_asked_right_after_the_base_by_every_strategy(name):
    queued = ({"codegen": {"a": 2}}, {"codegen": {"b": 3, "c": True}})
    strategy = make_strategy(name, DECISIONS, seed=0, base={}, budget=None, canonical=SPACE.canonical,
                             searchable=lambda stage, id: True, first=queued)
    history = _drive(strategy, 6)
    asked = [config_key(config) for config, _ in history]
    assert asked[:3] == [config_key({}), *(config_key(SPACE.canonical(q)) for q in queued)]
    assert len(set(asked)) == len(asked)  # a queued config is never asked again


def test_the_tuner_measures_a_queued_config_first(db):
    # FakeRunner (a test double): the queued config is the faster one, so it becomes the best.
    queued = {"codegen": {OPTIONS[1]: True}}
    fake = FakeRunner(lambda candidate: 0.5e-3 if candidate.compile_options.get(OPTIONS[1]) else 1e-3)
    result = xtat.tune(tiny_mlp(), db=db, budget=2, options=OPTIONS, stages=("codegen",), first=(queued,),
                       runner=fake_runner_factory(fake), **{**FAST, "finalists": 1, "rounds": 3, "samples": 3})
    assert [event.config for event in result.history] == [{}, queued]
