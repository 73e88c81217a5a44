"""`xtat bench` and the report layer: writer on synthetic data, statistics, one real campaign."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import asdict, replace
from html.parser import HTMLParser

import numpy as np
import pytest

from xtat.bench.campaign import (
    BenchResult,
    BenchSettings,
    Outcome,
    earlier_outcomes,
    geometric_mean,
    select,
    still_decided,
    tune_entry,
)
from xtat.bench.report import bench_report
from xtat.bench.roofline import MachinePeak, machine_key, place
from xtat.capture.workload import Workload
from xtat.core.errors import UserError
from xtat.report import (
    ConvergenceSeries,
    Figure,
    Paragraph,
    Preformatted,
    Report,
    RooflinePoint,
    Section,
    SpeedupBar,
    StageShares,
    Table,
    TrialPoint,
    ablation_figure,
    convergence_figure,
    roofline_figure,
    speedup_figure,
    write_report,
)
from xtat.report.figures import is_png
from xtat.store.sql import Store
from xtat.suite import SuiteEntry
from xtat.tuning.ablation import Ablation, Variant


class _Page(HTMLParser):
    """Collects img sources and any reference to a resource outside the page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.external: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None and not value.startswith(("data:", "#")):
                self.external.append(value)
        if tag not in ("meta", "img", "br"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()


def synthetic_report() -> Report:
    """A report on made-up numbers (SYNTHETIC: nothing here was measured)."""
    points = [TrialPoint(0.010, 1.0), TrialPoint(None, 2.0), TrialPoint(0.008, 1.5), TrialPoint(0.009, 1.0)]
    series = [ConvergenceSeries.from_trials("synthetic-a", points),
              ConvergenceSeries.from_trials("synthetic-b", points[::-1])]
    bars = [SpeedupBar("synthetic-a", 1.30, 1.20, 1.40, True), SpeedupBar("synthetic-b", 0.99, 0.97, 1.01, False)]
    return Report("Synthetic report <&>", (
        Section("Numbers", (Paragraph("made-up values: a < b & c"), Preformatted("xtat bench --suite x\n"),
                            Table(("workload", "speedup"), (("synthetic-a", "1.30 [1.20, 1.40]"),
                                                            ("pipe|name", "0.99"))))),
        Section("Figures", (
            Figure("convergence", convergence_figure(series), "best so far"),
            Figure("speedup", speedup_figure(bars)),
            Figure("ablation", ablation_figure([StageShares("synthetic-a", {"program": 0.9, "codegen": 0.2}, -0.1)])),
            Figure("roofline", roofline_figure(1e11, 2e10, [RooflinePoint("synthetic-a", 3.0, 1e9, 2e9)])),
        )),
    ))


def test_convergence_series_is_best_so_far_and_skips_failures():
    points = [TrialPoint(None, 1.0), TrialPoint(0.010, 1.0), TrialPoint(None, 2.0), TrialPoint(0.005, 0.5)]
    series = ConvergenceSeries.from_trials("s", points, default_s=0.010)
    assert series.trials == (2, 3, 4)
    assert series.wall_s == (2.0, 4.0, 4.5)
    assert series.best_speedup == (1.0, 1.0, 2.0)


def test_report_writer_on_synthetic_data_embeds_every_figure(tmp_path):
    report = synthetic_report()
    files = write_report(report, tmp_path / "out")
    assert sorted(p.name for p in files.figures) == ["ablation.png", "convergence.png", "roofline.png",
                                                     "speedup.png"]
    markdown = files.markdown.read_text()
    for figure in report.figures:
        assert f"]({figure.name}.png)" in markdown
        assert (tmp_path / "out" / f"{figure.name}.png").read_bytes() == figure.png
    assert "pipe\\|name" in markdown and "```\nxtat bench --suite x\n```" in markdown

    page = files.html.read_text()
    parser = _Page()
    parser.feed(page)
    assert parser.open == []  # every element closed
    assert parser.external == []  # self-contained
    assert len(parser.images) == len(report.figures) == 4
    for src, figure in zip(parser.images, report.figures):
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == figure.png
    assert "Synthetic report &lt;&amp;&gt;" in page and "a &lt; b &amp; c" in page


def test_report_model_rejects_bad_blocks():
    with pytest.raises(ValueError, match="do not have 2 cells"):
        Table(("a", "b"), (("1",),))
    with pytest.raises(ValueError, match="not PNG"):
        Figure("x", b"GIF89a")
    with pytest.raises(ValueError, match="letters, digits"):
        Figure("../x", speedup_figure([]))
    png = speedup_figure([])
    assert is_png(png)
    with pytest.raises(ValueError, match="used twice"):
        Report("r", (Section("s", (Figure("a", png), Figure("a", png))),))


# -- statistics and the campaign's pieces -----------------------------------------------------


def test_geometric_mean_and_its_bootstrap_interval():
    mean = geometric_mean([1.0, 2.0, 4.0])
    assert mean.value == pytest.approx(2.0) and mean.count == 3
    assert 1.0 <= mean.low < 2.0 < mean.high <= 4.0
    assert geometric_mean([1.0, 2.0, 4.0], seed=0) == mean  # seeded: reproducible
    wide, narrow = geometric_mean([0.5, 1.0, 2.0, 0.5, 2.0]), geometric_mean([0.95, 1.0, 1.05, 0.95, 1.05])
    assert wide.high - wide.low > narrow.high - narrow.low
    same = geometric_mean([1.25, 1.25, 1.25])
    assert (same.value, same.low, same.high) == pytest.approx((1.25, 1.25, 1.25))
    single = geometric_mean([1.5])
    assert (single.low, single.high) == (1.5, 1.5)
    assert geometric_mean([]) is None


def test_settings_and_selection_reject_bad_input():
    with pytest.raises(UserError, match="--size"):
        BenchSettings(size="huge")
    with pytest.raises(UserError, match="--forms"):
        BenchSettings(forms=("eval",))
    with pytest.raises(UserError, match="--budget or --time-per-workload"):
        BenchSettings(budget=None, time_per_workload_s=None)
    with pytest.raises(UserError, match="no suite workload 'nope'"):
        select(BenchSettings(suite=("moe-glam", "nope")))
    pairs = select(BenchSettings(suite=("moe-glam",), forms=("inference", "train")))
    assert [(e.name, f) for e, f in pairs] == [("moe-glam", "inference"), ("moe-glam", "train")]


def test_roofline_placement():
    peak = MachinePeak("roofline:test", flops_per_s=100e9, bytes_per_s=10e9, matmul_n=512, copy_bytes=1,
                       repeats=1, measured_at=0.0)
    assert peak.ridge_intensity == 10.0 and peak.roof(1.0) == 10e9 and peak.roof(100.0) == 100e9
    low, why = place(peak, {"flops": 2e9, "bytes accessed": 1e9}, default_s=1.0, tuned_s=0.5)
    assert why is None and low is not None
    assert low.intensity == 2.0 and low.default_flops_per_s == 2e9 and low.tuned_flops_per_s == 4e9
    assert low.default_fraction == pytest.approx(0.1) and low.tuned_fraction == pytest.approx(0.2)
    assert place(peak, {"flops": 1e9}, 1.0, 1.0) == (None, "no flops or bytes in XLA's cost analysis")


@pytest.mark.parametrize("cost, seconds, reason", [
    ({"flops": 2e9, "bytes accessed": 1e9, "while_loops": 2.0}, 1.0, "2 while loop(s)"),
    ({"flops": 2e9, "bytes accessed": 1e9}, 0.01, "of the roof, which no program reaches"),  # 200 GFLOP/s
])
def test_no_roofline_point_above_the_roof_and_loops_left_out_with_the_reason(cost, seconds, reason):
    peak = MachinePeak("roofline:test", flops_per_s=100e9, bytes_per_s=10e9, matmul_n=512, copy_bytes=1,
                       repeats=1, measured_at=0.0)
    placement, why = place(peak, cost, default_s=seconds, tuned_s=seconds)
    assert placement is None and reason in why


def test_capture_counts_the_while_loops_the_cost_analysis_undercounts():
    from jax import lax

    from xtat.capture.workload import capture

    def looped(x):
        return lax.fori_loop(0, 10, lambda i, v: v * 1.01, x)

    assert capture(Workload(looped, (np.ones(8, np.float32),))).cost["while_loops"] == 1.0
    assert capture(Workload(lambda x: x * 2, (np.ones(8, np.float32),))).cost["while_loops"] == 0.0


def _raising_fn(x):
    raise ValueError("this model does not trace")


def test_a_failing_workload_is_an_outcome_with_its_error(tmp_path):
    peak = MachinePeak("roofline:test", 1e9, 1e9, 512, 1, 1, 0.0)
    settings = BenchSettings(budget=2)
    untraceable = SuiteEntry("broken", "test", "traces to an error",
                             train=lambda size: Workload(_raising_fn, (np.ones(3, np.float32),), name="broken/train"),
                             inference=lambda size: Workload(_raising_fn, (np.ones(3, np.float32),)))
    outcome = tune_entry(untraceable, "train", settings, tmp_path / "x.db", peak)
    assert not outcome.tuned and "fails to trace" in outcome.error and "does not trace" in outcome.error

    def unbuildable(size):
        raise RuntimeError("weights of size " + size + " do not fit")

    outcome = tune_entry(SuiteEntry("unbuildable", "test", "", unbuildable, unbuildable), "inference", settings,
                         tmp_path / "x.db", peak)
    assert outcome.error == "RuntimeError: weights of size small do not fit"
    assert outcome.to_json()["delivered_speedup"] is None


def synthetic_bench_result() -> BenchResult:
    """A campaign result on made-up numbers (SYNTHETIC: nothing here was measured)."""
    peak = MachinePeak("roofline:synthetic", 50e9, 10e9, 1024, 1 << 28, 5, 0.0)
    history = (TrialPoint(0.010, 2.0), TrialPoint(None, 1.0), TrialPoint(0.008, 2.0))
    adopted = Outcome("synthetic-a/train", "synthetic-a", "test", "train", fingerprint="f" * 64, default_ms=10.0,
                      default_ci_ms=(9.8, 10.2), best_ms=8.0, best_ci_ms=(7.9, 8.1), speedup=1.25,
                      speedup_ci=(1.2, 1.3), search_speedup=1.4, search_speedup_ci=(1.3, 1.5), adopted=True,
                      message="adopted", config={"program": {"d": 8}},
                      trials={"crash": 1, "ok": 2}, history=history,
                      ablation=Ablation("synthetic-a/train", "f" * 64, {"program": {"d": 8}}, 10.0, (9.8, 10.2),
                                        {"adopted": Variant({"program": {"d": 8}}, 8.0, (7.9, 8.1), 1.25, (1.2, 1.3))},
                                        {"program": 1.0}, 0.0, 21),
                      roofline=place(peak, {"flops": 1e8, "bytes accessed": 1e7}, 0.010, 0.008)[0])
    kept = Outcome("synthetic-b/train", "synthetic-b", "test", "train", fingerprint="e" * 64, default_ms=5.0,
                   default_ci_ms=(4.9, 5.1), best_ms=5.0, best_ci_ms=(4.9, 5.1), speedup=1.0, speedup_ci=(0.98, 1.03),
                   search_speedup=1.1, search_speedup_ci=(1.05, 1.2), message="no significant improvement",
                   trials={"ok": 3}, history=history[:1],
                   roofline_left_out="1 while loop(s), whose bodies XLA's cost analysis counts once")
    failed = Outcome("synthetic-c/train", "synthetic-c", "test", "train", error="UserError: does not trace")
    outcomes = (adopted, kept, failed)
    return BenchResult(BenchSettings(suite=("synthetic-a", "synthetic-b", "synthetic-c"), forms=("train",),
                                     budget=3), outcomes, peak, False, geometric_mean([1.25, 1.0]),
                       geometric_mean([1.25, 1.0]), 12.0, "synthetic.db")


def test_bench_report_on_synthetic_result(tmp_path):
    result = synthetic_bench_result()
    assert [o.delivered_speedup for o in result.outcomes[:2]] == [1.25, 1.0]
    report = bench_report(result)
    assert [f.name for f in report.figures] == ["speedup", "convergence-train", "ablation", "roofline"]
    files = write_report(report, tmp_path)
    markdown = files.markdown.read_text()
    assert "synthetic-c/train | - | - | - | - | failed" in markdown
    # Search and confirmed speedups side by side; a confirmed interval that includes 1 is flagged.
    assert "| 1.400 [1.300, 1.500] | 1.250 [1.200, 1.300] | yes |" in markdown
    assert "| 1.100 [1.050, 1.200] | 1.000 [0.980, 1.030] (interval includes 1) | no |" in markdown
    assert "crash 1, ok 2 | crash 1 |" in markdown  # trials by status, failures by status
    assert "program 100%" in markdown and "## Failed workloads" in markdown
    assert "Largest adopted speedups: synthetic-a/train 1.250 [1.200, 1.300]" in markdown
    assert "synthetic-b/train | 1 while loop(s)" in markdown  # left out of the roofline, with the reason
    page = _Page()
    page.feed(files.html.read_text())
    assert len(page.images) == 4 and page.external == []
    json.dumps(result.to_json())  # every number serializes


# -- one real campaign through the command line -------------------------------------------------

BENCH_FAST = ["--rounds", "5", "--samples", "3", "--min-sample-s", "0.005"]


def _bench(db, folder, *extra) -> dict:
    command = [sys.executable, "-m", "xtat.cli.app", "bench", "--suite", "moe-glam", "--forms", "inference",
               "--budget", "2", "--db", str(db), "--report", str(folder), "--json", *BENCH_FAST, *extra]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # the campaign itself is covered in the default run by the read-back test below
@pytest.mark.timeout(600)  # about a minute on a quiet 2-core machine; minutes when it is shared
def test_bench_cli_tunes_and_reports(tmp_path):
    """Real XLA: moe-glam inference, budget 2, short timing, through the command line."""
    db, folder = tmp_path / "bench.db", tmp_path / "report"
    document = _bench(db, folder)
    [row] = document["workloads"]
    assert row["name"] == "moe-glam/inference" and row["error"] is None and not row["read_back"]
    assert sum(row["trials"].values()) == 2 and row["new_trials"] == 2
    assert row["default_ci_ms"][0] <= row["default_ms"] <= row["default_ci_ms"][1]
    assert row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1]
    assert len(row["history"]) == 2 and row["history"][0]["median_s"] > 0  # the default, measured
    assert row["cost"]["flops"] > 0 and row["roofline"]["intensity"] > 0
    assert document["peak_measured_now"] and document["peak"]["flops_per_s"] > 1e8
    assert document["geomean_delivered"]["count"] == 1
    assert {p.name for p in folder.iterdir()} >= {"report.md", "report.html", "bench.json", "speedup.png",
                                                 "convergence-inference.png", "roofline.png"}
    assert json.loads((folder / "bench.json").read_text())["workloads"] == document["workloads"]
    page = _Page()
    page.feed((folder / "report.html").read_text())
    assert len(page.images) == 3 and all(src.startswith("data:image/png;base64,") for src in page.images)
    store = Store.open(db, read_only=True)  # the peaks are a stored machine fact now
    try:
        assert store.machine_fact(machine_key())["flops_per_s"] == document["peak"]["flops_per_s"]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_bench_cli_rerun_resumes(tmp_path):
    """Slow (two real campaigns, minutes on a loaded 2-core machine): the same command again reads
    the finished workload back and the peaks from the store."""
    db, folder = tmp_path / "bench.db", tmp_path / "report"
    first, again = _bench(db, folder), _bench(db, folder)
    assert not again["peak_measured_now"] and again["peak"] == first["peak"]
    [row], [row2] = first["workloads"], again["workloads"]
    assert row2["read_back"] and (row2["default_ms"], row2["speedup"], row2["adopted"]) == \
        (row["default_ms"], row["speedup"], row["adopted"])


def test_a_finished_workload_is_read_back_from_the_campaign_file(tmp_path):
    """Real XLA on a tiny workload: tuned once, then read back instead of tuned again. A budget of
    the default alone: reading back does not depend on what was adopted, and a second config (the
    sweep's first, the one-CPU process setup) costs two minutes of pairs of fresh processes."""
    from tiny import mlp, tiny_mlp

    entry = SuiteEntry("tiny", "test", "tiny MLP", train=lambda size: tiny_mlp(), inference=lambda size: tiny_mlp())
    settings = BenchSettings(budget=1, rounds=5, samples=3, min_sample_s=0.005)
    peak = MachinePeak("roofline:test", 1e10, 1e9, 512, 1, 1, 0.0)
    db, folder = tmp_path / "x.db", tmp_path / "report"
    first = tune_entry(entry, "train", settings, db, peak)
    assert first.tuned and first.new_trials == 1 and not first.read_back, first.error
    folder.mkdir()
    (folder / "bench.json").write_text(json.dumps({"settings": asdict(settings), "workloads": [first.to_json()]}))

    earlier = earlier_outcomes(folder, settings)
    assert earlier == {"tiny/train": first}  # to_json and from_json are inverses
    assert earlier_outcomes(folder, replace(settings, budget=2)) == {}  # other measurement settings: afresh
    again = tune_entry(entry, "train", settings, db, peak, earlier["tiny/train"])
    assert again.read_back and replace(again, read_back=False, wall_s=first.wall_s) == first

    w, x = tiny_mlp().args
    assert not still_decided(Workload(mlp, (w, x[:16])), earlier["tiny/train"], db)  # another program: tuned


def test_bench_cli_bad_input_is_a_clear_error_and_writes_nothing(tmp_path):
    db = tmp_path / "bench.db"
    result = subprocess.run([sys.executable, "-m", "xtat.cli.app", "bench", "--suite", "mlp,nope", "--db", str(db),
                             "--report", str(tmp_path / "r")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "no suite workload 'nope'" in result.stderr, result.stderr[-2000:]
    assert not db.exists() and not (tmp_path / "r").exists()
