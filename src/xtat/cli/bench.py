"""`xtat bench`: tune suite workloads into the store and write the campaign's report."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.bench.campaign import BenchResult, Outcome

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from xtat.cli.common import console, emit, names, out, results_only_on_stdout, user_errors
from xtat.cli.common import fail as _fail
from xtat.core.errors import UserError

# Timing effort per sample: hidden because the tuner's defaults are right outside of tests.
_HIDDEN: dict[str, Any] = dict(hidden=True, show_default=False)


@results_only_on_stdout
def bench(
    suite: str = typer.Option("all", help="Comma-separated suite workloads (`xtat suite list`), or all."),
    size: str = typer.Option("small", help="small (a CPU) or large (an accelerator)."),
    forms: str = typer.Option("train,inference", help="Forms of each workload to tune."),
    budget: int | None = typer.Option(None, help="Configs per workload and form, the default included."),
    time_per_workload: float | None = typer.Option(None, help="Search seconds per workload and form "
                                                      "(default 60 when --budget is not given)."),
    report: Path = typer.Option(Path("xtat-bench"), "--report", help="Folder for report.md (figures beside "
                                "it), report.html and bench.json; rerunning with the same folder and --db "
                                "resumes."),
    db: Path | None = typer.Option(None, "--db", help="SQLite database (default ~/.cache/xtat/xtat.db or "
                                      "$XTAT_DB)."),
    seed: int = typer.Option(0, help="Seed of every search and bootstrap."),
    rounds: int = typer.Option(21, help="Interleaved rounds re-measuring finalists and ablation variants."),
    ablation: bool = typer.Option(True, help="Explain adopted configs per stage (costs a re-measurement each)."),
    remeasure_peak: bool = typer.Option(False, help="Measure this machine's roofline peaks again (they are "
                                        "measured once and stored; re-measure after a busy first measurement)."),
    as_json: bool = typer.Option(False, "--json", help="Print every number as one JSON object last."),
    samples: int | None = typer.Option(None, **_HIDDEN),
    min_sample_s: float | None = typer.Option(None, **_HIDDEN),
) -> None:
    """Tune suite workloads one after another and write a report: speedups with intervals,
    their geometric mean, convergence, per-stage ablation and a roofline."""
    from xtat.bench.campaign import BenchSettings, run_bench
    from xtat.bench.report import bench_report
    from xtat.report import write_report

    try:
        suite_names = () if suite.strip() == "all" else names(suite)
        if not suite_names and suite.strip() != "all":
            raise UserError("--suite: name one or more suite workloads, or all")
        asked = dict(samples=samples, min_sample_s=min_sample_s)
        timing: dict[str, Any] = {k: v for k, v in asked.items() if v is not None}
        settings = BenchSettings(suite=suite_names, size=size, forms=names(forms), budget=budget,
                                 time_per_workload_s=time_per_workload if time_per_workload is not None
                                 else (None if budget is not None else 60.0),
                                 seed=seed, rounds=rounds, ablation=ablation,
                                 remeasure_peak=remeasure_peak, **timing)
    except UserError as exc:
        _fail(str(exc))

    def on_workload(index: int, total: int, name: str) -> None:
        console.print(f"[bold][{index}/{total}] {name}[/] tuning ...", highlight=False)

    def on_outcome(o: Outcome) -> None:
        if not o.tuned:
            console.print(f"  [red]failed[/] after {o.wall_s:.0f} s: {o.error}", highlight=False)
            return
        console.print(f"  default {o.default_ms:.3f} ms  speedup {o.speedup:.3f}x {_interval(o.speedup_ci)}  "
                      f"{'adopted' if o.adopted else 'not adopted'}  trials {o.trials}  "
                      f"{'read back from the earlier campaign' if o.read_back else f'new {o.new_trials}'}  "
                      f"{o.wall_s:.0f} s", highlight=False)

    with user_errors("finished trials are kept in the store; run the same command again to resume"):
        result = run_bench(settings, db=db, report_dir=report, on_workload=on_workload, on_outcome=on_outcome)
    files = write_report(bench_report(result), report)
    if not as_json:  # with --json, stdout is the JSON object alone
        _print_summary(result)
    console.print(f"report: {files.markdown} and {files.html}  ({len(files.figures)} figures)")
    if as_json:
        emit(json.dumps(result.to_json()) + "\n")  # one line, last


def _print_summary(result: BenchResult) -> None:
    """The campaign's table and means, on stdout."""
    table = Table(title=f"xtat bench: {len(result.outcomes)} workload(s)")
    for column in ("workload", "default ms", "tuned ms", "speedup [95% CI]", "adopted", "trials"):
        table.add_column(column, overflow="fold")
    for o in result.outcomes:
        if not o.tuned:
            table.add_row(o.name, "-", "-", "-", "[red]failed[/]", (o.error or "")[:100])
            continue
        table.add_row(o.name, f"{o.default_ms:.3f}", f"{o.tuned_ms:.3f}",
                      f"{o.speedup:.3f} {_interval(o.speedup_ci)}",
                      "yes" if o.adopted else "no", ", ".join(f"{k} {v}" for k, v in o.trials.items()))
    out.print(table)
    for label, mean in (("delivered", result.delivered), ("best finalist", result.best_found)):
        if mean is not None:
            out.print(f"geometric-mean speedup ({label}) {mean.value:.3f}x  95% CI [{mean.low:.3f}, "
                      f"{mean.high:.3f}] over {mean.count} workload(s)", highlight=False)
    peak = result.peak
    out.print(f"roofline peaks {peak.flops_per_s / 1e9:.1f} GFLOP/s, {peak.bytes_per_s / 1e9:.1f} GB/s "
              f"({'measured now' if result.peak_measured_now else 'from the store'})  "
              f"wall {result.wall_s:.1f} s  db {result.db}", highlight=False)


def _interval(ci: tuple[float, float] | None) -> str:
    return "[-]" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
