"""`xtat compare`: strategies side by side on workloads at equal budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.compare.analysis import CampaignAnalysis
    from xtat.tuning.result import TrialEvent

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from xtat.cli.common import console, emit, names, out, results_only_on_stdout, user_errors
from xtat.cli.common import fail as _fail
from xtat.core.errors import UserError
from xtat.stages.order import STAGE_ORDER

# Measurement effort and deadlines, passed on to every run; hidden because the defaults are right
# outside of tests (which need them short).
_HIDDEN: dict[str, Any] = dict(hidden=True, show_default=False)


def _default_dir() -> Path:
    from xtat.store import default_path

    return default_path().parent / "compare"


@results_only_on_stdout
def compare(
    targets: list[str] = typer.Argument(..., help="Workloads, as for `xtat tune` (suite:NAME/FORM included)."),
    strategies: str = typer.Option(..., help="Comma-separated strategies to run, e.g. "
                                   "random,evolution,tpe,optuna-options."),
    budget: int = typer.Option(60, help="Configs per run, the default included."),
    reference_budget: int | None = typer.Option(
        None, help="Configs per random run (default: --budget). random is what the trials ratio divides by, "
        "and a run that never reaches the target counts as budget + 1; a larger budget (e.g. 3x) measures "
        "how many trials random needs instead of capping it."),
    seeds: int = typer.Option(3, help="Runs per (workload, strategy), with seeds 0..K-1."),
    db: Path | None = typer.Option(None, "--db", help="Folder for one store and one record per run "
                                      "(default: compare/ beside the default database); rerunning the same "
                                      "command there continues the campaign."),
    stages: str = typer.Option(",".join(STAGE_ORDER), help="Stages searched by every strategy but "
                               "optuna-options, which searches codegen only."),
    report: Path | None = typer.Option(None, "--report", help="Write report.md (figures beside it) and "
                                          "report.html into this folder."),
    as_json: bool = typer.Option(False, "--json", help="Print every number as one JSON object last."),
    min_sample_s: float | None = typer.Option(None, **_HIDDEN),
    samples: int | None = typer.Option(None, **_HIDDEN),
    rounds: int | None = typer.Option(None, **_HIDDEN),
    min_deadline_s: float | None = typer.Option(None, **_HIDDEN),
) -> None:
    """Run each strategy on each workload with each seed at the same budget, then compare:
    trials and time to 95% of the best speedup found, final speedups, convergence."""
    from xtat.compare.analysis import analyze
    from xtat.compare.runs import CampaignPlan, RunStart, remeasure_campaign, run_campaign

    started = time.perf_counter()
    tuning = {k: v for k, v in dict(min_sample_s=min_sample_s, samples=samples, rounds=rounds,
                                    min_deadline_s=min_deadline_s).items() if v is not None}
    try:
        plan = CampaignPlan(targets=tuple(targets), strategies=names(strategies),
                            budget=budget, seeds=seeds, db_dir=db or _default_dir(),
                            stages=names(stages), tuning=tuning, reference_budget=reference_budget)
    except UserError as exc:
        _fail(str(exc))
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task("compare", total=budget, info="")

        def on_run(start: RunStart) -> None:
            done = "  (finished before: read back)" if start.finished_before else ""
            progress.update(task, completed=0, total=start.budget, info="",
                            description=f"run {start.index}/{start.total} {start.workload} {start.strategy} "
                                        f"seed {start.seed}{done}")

        def on_trial(event: TrialEvent) -> None:
            best = "-" if event.best_s is None else f"{event.best_s * 1e3:.3f} ms"
            progress.update(task, completed=event.index, info=f"best {best}")

        with user_errors("finished runs and trials are kept; run the same command again to continue"):
            runs = run_campaign(plan, on_run=on_run, on_trial=on_trial)

            def on_workload(name: str, incumbents: int) -> None:
                progress.update(task, completed=0, total=1, info="",
                                description=f"re-measuring {name}: {incumbents} incumbents side by side")

            remeasured = remeasure_campaign(plan, runs, on_workload)
    analysis = analyze(runs, plan.budget, remeasured, plan.reference_budget)
    wall_s = time.perf_counter() - started
    if not as_json:  # with --json, stdout is the JSON object alone
        _print_tables(analysis)
    if report is not None:
        from xtat.compare.report import campaign_report
        from xtat.report import write_report

        command = "xtat " + shlex.join(sys.argv[1:])
        files = write_report(campaign_report(analysis, command, wall_s), report)
        console.print(f"report: {files.markdown} and {files.html}")
    console.print(f"{len(runs)} runs in {plan.db_dir}  wall {wall_s:.1f} s")
    if as_json:
        document = {"targets": list(plan.targets), "strategies": list(plan.strategies), "budget": budget,
                    "reference_budget": analysis.reference_budget, "seeds": seeds, "stages": list(plan.stages),
                    "wall_s": wall_s, "db": str(plan.db_dir),
                    "analysis": asdict(analysis), "runs": [asdict(r) for r in runs], "remeasured": remeasured}
        emit(json.dumps(document) + "\n")  # one line, last


def _print_tables(analysis: CampaignAnalysis) -> None:
    """The campaign's tables and summary, on stdout."""
    from xtat.compare.report import STRATEGY_COLUMNS, strategy_cells, summary_lines, workload_caption

    for w in analysis.workloads:
        table = Table(title=workload_caption(w))
        for column in STRATEGY_COLUMNS:
            table.add_column(column)
        for s in w.strategies:
            table.add_row(*strategy_cells(s))
        out.print(table)
    for line in summary_lines(analysis):
        out.print(line, highlight=False)


