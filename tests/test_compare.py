"""`xtat compare`: the analysis on synthetic histories, the campaign plan, and one real CLI run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from records import ended
from tiny import FAST, tiny_target
from xtat.compare.analysis import (
    BASELINE,
    Point,
    RunRecord,
    analyze,
    convergence,
    first_reaching,
    incumbents,
    median_by_trials,
    median_by_wall,
    median_not_reached_last,
)
from xtat.compare.remeasure import remeasure, remeasured_path
from xtat.compare.report import campaign_report
from xtat.compare.runs import (
    TUNING_FIELDS,
    CampaignPlan,
    available_strategies,
    record_from_result,
    run_campaign,
    run_paths,
)
from xtat.core.errors import UserError
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.report import to_html, to_markdown
from xtat.store.sql import Store
from xtat.tuner import TuneSettings
from xtat.tuning.result import AdoptionOutcome, TimeSplit, TrialEvent, TuneResult

# The timing part of FAST: what a campaign plan takes.
FAST_TIMING = {k: v for k, v in FAST.items() if k in TUNING_FIELDS}

XTAT = [sys.executable, "-m", "xtat.cli.app"]


def synthetic_history(medians: list[float | None], spent_s: float = 1.0) -> list[TrialEvent]:
    """A SYNTHETIC tuner history (no measurement): the default first, None = a failed trial."""
    return [TrialEvent(i, {} if i == 1 else {"codegen": {"x": i}},
                       TrialStatus.OK if m is not None else TrialStatus.COMPILE_ERROR, m, None, False, spent_s)
            for i, m in enumerate(medians, start=1)]


def synthetic_result(medians: list[float | None], speedup: float = 1.0, adopted: bool = False) -> TuneResult:
    """A SYNTHETIC TuneResult around `synthetic_history(medians)` (nothing measured)."""
    outcome = AdoptionOutcome.ADOPTED if adopted else AdoptionOutcome.NOT_FASTER
    return TuneResult("w", "f" * 64, 1.0, (1.0, 1.0), 1.0, (1.0, 1.0), speedup, (speedup - 0.2, speedup + 0.2),
                      adopted, outcome, {"ok": len(medians)}, {}, len(medians), "synthetic", 12.0, TimeSplit(), "",
                      history=synthetic_history(medians))


def synthetic_run(workload: str, strategy: str, medians: list[float | None], seed: int = 0,
                  final: float = 1.0, adopted: bool = False, spent_s: float = 1.0) -> RunRecord:
    """A SYNTHETIC run record: its curve from `synthetic_history`, its final speedup given."""
    history = synthetic_history(medians, spent_s)
    return RunRecord(workload, strategy, seed, convergence(history), final, (final, final), adopted,
                     wall_s=spent_s * len(medians), default_s=medians[0], incumbents=incumbents(history))


def key(index: int) -> str:
    """The config key of trial `index` of a synthetic history."""
    return json.dumps({"codegen": {"x": index}}, sort_keys=True, separators=(",", ":"))


def test_convergence_is_default_over_best_verified_so_far_with_summed_cost():
    curve = convergence(synthetic_history([10.0, 12.0, None, 5.0, 8.0], spent_s=0.5))
    assert [p.trials for p in curve] == [1, 2, 3, 4, 5]
    assert [p.speedup for p in curve] == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert [p.wall_s for p in curve] == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_convergence_needs_the_measured_default_first():
    with pytest.raises(ValueError, match="default"):
        convergence(synthetic_history([10.0, 5.0])[::-1])  # the default is not first
    with pytest.raises(ValueError, match="default"):
        convergence(synthetic_history([None, 5.0]))


def test_first_reaching_and_not_reached():
    curve = convergence(synthetic_history([10.0, 9.0, 6.0, 5.0]))
    assert first_reaching(curve, 1.6) == Point(3, 3.0, 10.0 / 6.0)
    assert first_reaching(curve, 2.5) is None


def test_median_counts_not_reached_as_later_than_any_number():
    assert median_not_reached_last([3, None, 5]) == 5
    assert median_not_reached_last([3, None]) is None  # half the seeds did not reach it
    assert median_not_reached_last([None, None, 2]) is None
    assert median_not_reached_last([4, 2]) == 3


def test_trials_and_wall_to_95_percent_of_the_best_of_any_strategy():
    runs = [synthetic_run("w", "random", [10.0, 9.0, 8.0, 5.2, 5.0], spent_s=2.0),  # best 2.0x, 95% = 1.9x
            synthetic_run("w", "evolution", [10.0, 5.1, 9.0, 9.0, 9.0], spent_s=1.0)]  # 10/5.1 = 1.96x
    w = analyze(runs, budget=5).workloads[0]
    assert w.best_speedup == 2.0 and w.best_by == "random" and w.target == pytest.approx(1.9)
    random, evolution = w.strategy("random"), w.strategy("evolution")
    assert (random.trials_to_target, random.wall_to_target_s) == (4, 8.0)  # 10/5.2 = 1.92x at trial 4
    assert (evolution.trials_to_target, evolution.wall_to_target_s) == (2, 2.0)


def test_curves_are_rebased_on_the_median_default_so_a_slow_default_does_not_inflate_a_run():
    runs = [synthetic_run("w", "random", [10.0, 5.0]), synthetic_run("w", "tpe", [11.0, 5.5]),
            synthetic_run("w", "evolution", [30.0, 5.0])]  # its default measured in a slow spell
    w = analyze(runs, budget=2).workloads[0]
    assert w.reference_s == 11.0  # the median of 10, 11 and 30
    assert w.best_speedup == pytest.approx(2.2) and w.target == pytest.approx(2.09)
    # Against its own default the evolution run would show 6x and set a target nobody else reaches.
    assert [w.strategy(s).trials_to_target for s in ("random", "tpe", "evolution")] == [2, None, 2]
    assert w.strategy("tpe").best_found == pytest.approx(2.0)


def test_incumbents_are_the_fastest_verified_config_so_far():
    assert incumbents(synthetic_history([10.0, 8.0, None, 9.0, 5.0])) == ("{}", key(2), key(2), key(2), key(5))


def test_remeasured_curves_replace_lucky_search_timings():
    # Search timing says evolution's trial 2 is 5x; side by side it is 1.05x. Random's trial 3 is 1.5x.
    runs = [synthetic_run("w", "evolution", [10.0, 2.0, 9.0]), synthetic_run("w", "random", [10.0, 9.0, 8.0])]
    evolution_key, random_keys = key(2), (key(2), key(3))  # the synthetic configs of both runs share keys
    assert analyze(runs, budget=3).workloads[0].best_speedup == 5.0  # from search timing
    speedups = {evolution_key: 1.05, random_keys[1]: 1.5}
    w = analyze(runs, budget=3, remeasured={"w": speedups}).workloads[0]
    assert w.remeasured and w.best_by == "random" and w.best_speedup == 1.5
    assert [v for _, v in w.strategy("random").by_trials] == [1.0, 1.05, 1.5]
    assert w.strategy("evolution").trials_to_target is None and w.strategy("random").trials_to_target == 3
    # An incumbent that did not rebuild keeps the value before it.
    # Search timing may move a run to an incumbent that re-measures slower: the target is set by
    # the best speedup reached at any trial, not only by the runs' last incumbents.
    # Here random's incumbent goes from trial 2's config (1.6x) to trial 3's (1.5x).
    dip = analyze(runs, budget=3, remeasured={"w": {key(2): 1.6, key(3): 1.5}})
    assert dip.workloads[0].best_speedup == 1.6 and dip.workloads[0].strategy("random").best_found == 1.5
    partial = analyze(runs, budget=3, remeasured={"w": {random_keys[1]: 1.5}}).workloads[0]
    assert [v for _, v in partial.strategy("evolution").by_trials] == [1.0, 1.0, 1.0]


def test_remeasure_reads_back_a_record_covering_every_incumbent(tmp_path):
    runs = [synthetic_run("w", "random", [10.0, 9.0, 8.0])]
    settings = TuneSettings(**FAST)
    recorded = {key(2): {"speedup": 1.1, "speedup_ci": [1.0, 1.2]}, key(3): {"error": "failed to build"}}
    remeasured_path(tmp_path).write_text(json.dumps({
        "format": "xtat-compare-remeasure/1", "speedups": recorded,
        "settings": {"rounds": settings.rounds, "min_sample_s": settings.min_sample_s,
                     "samples": settings.samples, "seed": settings.seed}}))
    # No workload is given: reading back must not capture or measure anything.
    assert remeasure(None, runs, tmp_path, settings) == recorded  # type: ignore[arg-type]


def test_remeasure_times_each_incumbent_beside_its_own_default_in_its_own_process(tmp_path, monkeypatch):
    from tiny import tiny_mlp
    from xtat.runner.process import ProcessRunner

    configs = [{"codegen": {"xla_backend_optimization_level": 1}}, {"codegen": {"xla_cpu_prefer_vector_width": 128}}]
    history = [TrialEvent(1, {}, TrialStatus.OK, 2.0, None, False, 1.0)] + [
        TrialEvent(i, c, TrialStatus.OK, 2.0 - i / 2, None, False, 1.0) for i, c in enumerate(configs, start=2)]
    run = RunRecord("w", "sweep", 0, convergence(history), 1.0, (1.0, 1.0), False, wall_s=3.0, default_s=2.0,
                    incumbents=incumbents(history))
    placed: list[tuple[list[str], set[int]]] = []
    place = ProcessRunner.place

    def spy(self, builds, timing, deploy=None):
        result = place(self, builds, timing, deploy)
        placed.append(([id for id, _ in builds], {worker.process.pid for _, worker in result.placed}))
        return result

    monkeypatch.setattr(ProcessRunner, "place", spy)
    speedups = remeasure(tiny_mlp(), [run], tmp_path, TuneSettings(**FAST))
    assert set(speedups) == {config_key(c) for c in configs}
    assert [len(ids) for ids, _ in placed] == [2, 2]  # the default and one incumbent, twice
    assert placed[0][1].isdisjoint(placed[1][1])  # in other processes


def test_not_reached_is_a_value_in_the_summary_and_the_table():
    runs = [synthetic_run("w", "random", [10.0, 5.0]), synthetic_run("w", "sweep", [10.0, 9.0])]
    w = analyze(runs, budget=2).workloads[0]
    sweep = w.strategy("sweep")
    assert sweep.trials_to_target is None and sweep.wall_to_target_s is None and sweep.reached == 0
    report = to_markdown(campaign_report(analyze(runs, budget=2), "xtat compare (synthetic)", 1.0))
    assert "| sweep | not reached | not reached | 0/1 |" in report


def test_median_over_seeds_final_speedup_range_adopted_and_curves():
    runs = [synthetic_run("w", "tpe", [10.0, 5.0, 5.0], seed=0, final=1.9, adopted=True),
            synthetic_run("w", "tpe", [10.0, 10.0, 4.0], seed=1, final=2.4, adopted=True),
            synthetic_run("w", "tpe", [10.0, 10.0, 10.0], seed=2, final=1.0)]
    tpe = analyze(runs, budget=3).workloads[0].strategy("tpe")
    assert tpe.final_speedup == 1.9 and tpe.final_speedup_range == (1.0, 2.4) and tpe.adopted == 2
    assert tpe.best_found == 2.0  # median of 2.0, 2.5, 1.0
    # Target 0.95 * 2.5 (seed 1's best): seed 1 reaches it at trial 3, seeds 0 and 2 never.
    assert tpe.reached == 1 and tpe.trials_to_target is None
    assert tpe.by_trials == ((1, 1.0), (2, 1.0), (3, 2.0))


def test_not_reached_by_half_the_seeds_is_not_reached():
    runs = [synthetic_run("w", "tpe", [10.0, 4.0], seed=0), synthetic_run("w", "tpe", [10.0, 10.0], seed=1)]
    tpe = analyze(runs, budget=2).workloads[0].strategy("tpe")
    assert tpe.reached == 1 and tpe.trials_to_target is None


def test_median_curves_carry_the_last_value_and_align_wall_times():
    short = convergence(synthetic_history([10.0, 5.0], spent_s=1.0))  # ended early: 2 trials
    long = convergence(synthetic_history([10.0, 10.0, 10.0, 2.5], spent_s=0.5))
    assert median_by_trials([short, long]) == ((1, 1.0), (2, 1.5), (3, 1.5), (4, 3.0))
    # Times from 1.0 s (both defaults measured): short is 1x until 2 s, long 1x until 2 s, then 4x.
    assert median_by_wall([short, long]) == ((1.0, 1.0), (1.5, 1.0), (2.0, 3.0))


def test_ratio_summary_and_baseline_on_synthetic_campaign():
    runs = [
        # w1: best 2.0x (evolution at trial 2); target 1.9x. random reaches it at trial 6.
        synthetic_run("w1", "random", [10.0, 9, 9, 9, 9, 5.2, 9, 9], final=1.8),
        synthetic_run("w1", "evolution", [10.0, 5.0, 9, 9, 9, 9, 9, 9], final=1.95, adopted=True),
        synthetic_run("w1", "tpe", [10.0, 9, 5.1, 9, 9, 9, 9, 9], final=1.9),
        synthetic_run("w1", BASELINE, [10.0, 8, 8, 8, 8, 8, 8, 8], final=1.25),
        # w2: random never reaches 95% (censored at budget + 1 = 9); tpe at trial 3.
        synthetic_run("w2", "random", [10.0, 8, 8, 8, 8, 8, 8, 8], final=1.2),
        synthetic_run("w2", "evolution", [10.0, 9, 9, 9, 9, 9, 9, 9], final=1.0),
        synthetic_run("w2", "tpe", [10.0, 9, 4.0, 9, 9, 9, 9, 9], final=2.4),
        synthetic_run("w2", BASELINE, [10.0, 4.2, 9, 9, 9, 9, 9, 9], final=3.0),
    ]
    summary = analyze(runs, budget=8).summary
    assert summary.contenders == ("evolution", "tpe")
    assert summary.trials_ratio == {"w1": pytest.approx(2 / 6), "w2": pytest.approx(3 / 9)}
    assert summary.median_trials_ratio == pytest.approx(1 / 3)
    assert summary.speedup_vs_baseline == {"w1": pytest.approx(1.95 / 1.25), "w2": pytest.approx(2.4 / 3.0)}
    assert summary.median_speedup_vs_baseline == pytest.approx((1.95 / 1.25 + 2.4 / 3.0) / 2)
    assert summary.beats_baseline is True and summary.notes == ()


def test_a_larger_reference_budget_censors_random_later_and_says_so():
    runs = [
        # w1: target 1.9x; tpe reaches it at trial 3 of 4; random, given 12, never does.
        synthetic_run("w1", "random", [10.0] + [8.0] * 11),
        synthetic_run("w1", "tpe", [10.0, 9, 5.0, 9]),
        # w2: random reaches it at trial 10, past the others' budget; tpe never does.
        synthetic_run("w2", "random", [10.0] + [9.0] * 8 + [5.0, 9, 9]),
        synthetic_run("w2", "tpe", [10.0, 9, 9, 9]),
    ]
    analysis = analyze(runs, budget=4, reference_budget=12)
    # Not reached counts as the run's own budget + 1: 13 for random, 5 for tpe.
    assert analysis.summary.trials_ratio == {"w1": pytest.approx(3 / 13), "w2": pytest.approx(5 / 10)}
    assert analyze(runs, budget=4).summary.trials_ratio["w1"] == pytest.approx(3 / 5)  # random capped at 5
    report = to_markdown(campaign_report(analysis, "xtat compare (synthetic)", 1.0))
    assert "budget + 1 = 5, random 13" in report and "random: 12" in report


def test_reference_budget_goes_to_random_only_and_never_below_the_budget(tmp_path):
    plan = CampaignPlan(("t:w",), ("random", "tpe"), budget=5, seeds=1, db_dir=tmp_path, reference_budget=15)
    assert (plan.settings("random", 0).budget, plan.settings("tpe", 0).budget) == (15, 5)
    with pytest.raises(UserError, match="at least --budget"):
        CampaignPlan(("t:w",), ("random", "tpe"), budget=5, seeds=1, db_dir=tmp_path, reference_budget=4)
    with pytest.raises(UserError, match="add random"):
        CampaignPlan(("t:w",), ("tpe",), budget=5, seeds=1, db_dir=tmp_path, reference_budget=15)


def test_summary_leaves_out_what_it_cannot_compute_and_says_why():
    runs = [synthetic_run("w", "random", [10.0, 10.0]), synthetic_run("w", "tpe", [10.0, 10.0]),
            synthetic_run("w", "sweep", [10.0, 2.0])]  # only sweep reaches its own best
    summary = analyze(runs, budget=2).summary
    assert summary.trials_ratio == {"w": None} and summary.median_trials_ratio is None
    assert summary.beats_baseline is None
    assert any("neither" in n for n in summary.notes) and any(BASELINE in n for n in summary.notes)


def test_report_document_has_a_table_and_figure_per_workload():
    runs = [synthetic_run("w1", "random", [10.0, 5.0]), synthetic_run("w2", "random", [10.0, 9.0])]
    report = campaign_report(analyze(runs, budget=2), "xtat compare (synthetic)", 3.0)
    assert [f.name for f in report.figures] == ["convergence-1", "convergence-2"]
    page = to_html(report)
    assert page.count("data:image/png;base64,") == 2 and "xtat compare (synthetic)" in page


def test_record_from_a_tune_result_document():
    result = synthetic_result([4.0, 2.0], speedup=1.7, adopted=True)
    assert TuneResult.from_json(json.loads(json.dumps(result.to_json()))) == result  # as its record file keeps it
    run = record_from_result("w", "sweep", 1, result)
    assert run.best_found == 2.0 and run.final_speedup_ci == (1.5, 1.9) and run.adopted


def test_plan_refuses_unknown_strategies_listing_the_available_ones(tmp_path):
    with pytest.raises(UserError) as error:
        CampaignPlan(("t:w",), ("sweep", "no-such-strategy"), budget=5, seeds=1, db_dir=tmp_path)
    assert "'no-such-strategy'" in str(error.value)
    assert all(name in str(error.value) for name in available_strategies())
    with pytest.raises(UserError, match="twice"):
        CampaignPlan(("t:w",), ("sweep", "sweep"), budget=5, seeds=1, db_dir=tmp_path)
    with pytest.raises(UserError, match="--budget"):
        CampaignPlan(("t:w",), ("sweep",), budget=1, seeds=1, db_dir=tmp_path)
    with pytest.raises(UserError, match="--stages"):
        CampaignPlan(("t:w",), ("sweep",), budget=5, seeds=1, db_dir=tmp_path, stages=("nope",))


def test_baseline_is_tpe_over_codegen_only(tmp_path):
    if BASELINE not in available_strategies():
        pytest.skip("the tpe strategy has not landed: no optuna-options baseline yet")
    plan = CampaignPlan(("t:w",), (BASELINE, "tpe"), budget=5, seeds=1, db_dir=tmp_path)
    assert (plan.settings(BASELINE, 2).strategy, plan.settings(BASELINE, 2).stages) == ("tpe", ("codegen",))
    assert plan.settings("tpe", 0).stages == plan.stages


def test_model_runs_learn_from_the_earlier_workloads_runs_only(tmp_path, monkeypatch):
    # TEST-ONLY: tune() replaced by a recorder that leaves a store file and a TuneResult-like
    # document, so the plan's settings per run are seen without tuning anything.
    import xtat.compare.runs as runner

    seen = []

    def fake_tune(workload, db, settings, on_trial=None):
        seen.append((workload.display_name, settings.strategy, settings.learn_from))
        budgets.append((settings.strategy, settings.budget))
        Path(db).write_bytes(b"")
        return synthetic_result([1.0])

    monkeypatch.setattr(runner, "tune", fake_tune)
    plan = CampaignPlan((tiny_target("tiny_mlp"), tiny_target("tiny_nan_max")), ("random", "model"), budget=5, seeds=2,
                        db_dir=tmp_path, reference_budget=15)
    budgets: list[tuple[str, int]] = []
    starts = []
    run_campaign(plan, on_run=starts.append)
    # random gets the reference budget, in its tune settings and in what a progress display is told
    assert budgets == [(s.strategy, s.budget) for s in starts] == [("random", 15), ("model", 5)] * 4
    first = [str(run_paths(tmp_path, "tiny_mlp", s, seed).store) for seed in (0, 1) for s in ("random", "model")]
    assert [(w, s, lf) for w, s, lf in seen if s == "model"] == [("tiny_mlp", "model", ())] * 2 + \
        [("tiny_nan_max", "model", tuple(first))] * 2
    assert all(lf == () for _, s, lf in seen if s == "random")


def test_each_run_has_its_own_store(tmp_path):
    paths = {run_paths(tmp_path, "moe-glam/train", s, seed) for s in ("random", "tpe") for seed in (0, 1)}
    assert len({p.store for p in paths}) == 4 and all(p.store.parent == tmp_path / "moe-glam_train" for p in paths)


@pytest.mark.slow  # two real tuning runs with finalists: ~50 s on the loaded 2-core development machine
def test_a_larger_budget_continues_each_run_from_its_store(tmp_path):
    def plan(budget: int) -> CampaignPlan:
        return CampaignPlan((tiny_target("tiny_mlp"),), ("sweep",), budget=budget, seeds=1, db_dir=tmp_path,
                            stages=("codegen",), tuning=FAST_TIMING)

    (first,) = run_campaign(plan(2))
    events = []
    (second,) = run_campaign(plan(3), on_trial=events.append)  # the record's settings differ: resume the store
    assert [e.resumed for e in events] == [True, True, False]
    assert second.curve[:2] == first.curve and len(second.curve) == 3


def _compare(*args):
    return subprocess.run([*XTAT, "compare", *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # two CLI campaigns, ~50 s; the compare pieces are tested above, the naming in test_real_code.py
def test_compare_cli_end_to_end_on_tiny_then_resumes_without_measuring(tmp_path):
    strategies = ["sweep", "random"]
    fast = [f"--{key.replace('_', '-')}={value}" for key, value in FAST_TIMING.items()]
    args = [tiny_target("tiny_mlp"), "--strategies", ",".join(strategies), "--budget", 3, "--seeds", 1,
            "--stages", "codegen", "--db", tmp_path / "runs", "--report", tmp_path / "report", "--json", *fast]
    first = _compare(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    document = json.loads(first.stdout.strip().splitlines()[-1])
    assert [r["strategy"] for r in document["runs"]] == strategies
    assert all(len(r["curve"]) == 3 and r["curve"][0]["speedup"] == 1.0 for r in document["runs"])
    (workload,) = document["analysis"]["workloads"]
    assert workload["workload"] == "tiny_mlp" and [s["strategy"] for s in workload["strategies"]] == strategies
    assert (tmp_path / "report" / "report.html").read_text().count("data:image/png;base64,") == 1
    assert "| strategy | trials to 95% |" in (tmp_path / "report" / "report.md").read_text()
    records = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*.json")}
    remeasured = document["remeasured"]["tiny_mlp"]  # every incumbent but the default, measured side by side
    incumbents = {k for r in document["runs"] for k in r["incumbents"]} - {"{}"}
    assert set(remeasured) <= incumbents and len(remeasured) >= len(incumbents) - 1  # one may fail to rebuild
    assert len(records) == len(strategies) + bool(incumbents)  # + remeasured.json

    again = _compare(*args)  # the same command: every run is read back, nothing is measured
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["runs"] == document["runs"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*.json")} == records


def test_compare_cli_unknown_strategy_is_a_clear_error(tmp_path):
    result = _compare(tiny_target("tiny_mlp"), "--strategies", "sweep,warp-drive", "--db", tmp_path / "runs")
    assert result.returncode == 2 and "'warp-drive' does not exist; available:" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_campaign_stats_counts_duplicates_their_distance_and_measurement_agreement(tmp_path):
    # benchmarks/campaign_stats.py on a compare-like folder written here: one run whose third config
    # rebuilt the second's executable, one decision away, and whose final config was re-measured.
    folder = tmp_path / "w"
    folder.mkdir()
    store = Store.open(folder / "evolution-seed0.db")
    workload = store.upsert_workload("fp", "program", "w", {"platform": "cpu"}, {})
    run = store.begin_run(workload, {})
    a = {"codegen": {"x": 1}}
    b = {"codegen": {"x": 1, "y": True}}
    history = []
    for config, status, exe in (({}, "ok", "h0"), (a, "ok", "h1"), (b, "duplicate", "h1")):
        trial = store.start_trial(workload, run, config, config_key(config))
        store.finish_trial(trial, ended(status, exe_hash=exe, median_s=1.0))
        history.append({"config": config, "status": status, "median_s": 1.0, "spent_s": 0.1})
    store.close()
    record = {"strategy": "evolution", "seed": 0, "result": {"history": history, "best_config": a, "speedup": 1.25}}
    (folder / "evolution-seed0.json").write_text(json.dumps(record))
    (folder / "remeasured.json").write_text(json.dumps({"speedups": {config_key(a): {"speedup": 1.5}}}))
    script = Path(__file__).parents[1] / "benchmarks" / "campaign_stats.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path), "--json"], capture_output=True, text=True,
                          check=True)
    [row] = json.loads(done.stdout)
    assert row["duplicates"] == {"evolution": [1]}
    assert row["duplicate_distance"]["evolution"] == {"sizes": {"1": 1}, "decisions": {"codegen.y": 1}}
    assert row["remeasured_over_final"]["median"] == pytest.approx(1.5 / 1.25)
    refused = subprocess.run([sys.executable, str(script), str(tmp_path / "w")], capture_output=True, text=True)
    assert refused.returncode != 0 and "no run records" in refused.stderr
