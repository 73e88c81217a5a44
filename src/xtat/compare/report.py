"""A campaign's analysis as a report document (Markdown + HTML via `xtat.report`) and as text cells."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.report import Report

from xtat.compare.analysis import BASELINE, REFERENCE, CampaignAnalysis, StrategySummary, WorkloadSummary

STRATEGY_COLUMNS = ("strategy", "trials to 95%", "wall to 95% (s)", "seeds reached", "best found",
                    "final speedup [seeds' range]", "adopted")


def _number(value: float | None, digits: int = 1, unit: str = "") -> str:
    return "not reached" if value is None else f"{value:.{digits}f}{unit}"


def strategy_cells(s: StrategySummary) -> tuple[str, ...]:
    low, high = s.final_speedup_range
    trials = "not reached" if s.trials_to_target is None else f"{s.trials_to_target:g}"
    return (s.strategy, trials, _number(s.wall_to_target_s), f"{s.reached}/{s.seeds}", f"{s.best_found:.3f}x",
            f"{s.final_speedup:.3f}x [{low:.3f}, {high:.3f}]", f"{s.adopted}/{s.seeds}")


def workload_caption(w: WorkloadSummary) -> str:
    source = "incumbents re-measured side by side" if w.remeasured else "search timing, not re-measured"
    return (f"{w.workload}: best speedup found {w.best_speedup:.3f}x (by {w.best_by}); "
            f"target {w.target:.3f}x ({source})")


def summary_lines(analysis: CampaignAnalysis) -> list[str]:
    """The issue's two claims, in words, with the per-workload numbers they come from."""
    s = analysis.summary
    lines = []
    contenders = "/".join(s.contenders) or "-"
    if s.trials_ratio:
        per = ", ".join(f"{w} {'-' if r is None else f'{r:.2f}'}" for w, r in s.trials_ratio.items())
        median = "-" if s.median_trials_ratio is None else f"{s.median_trials_ratio:.2f}"
        lines.append(f"trials to {analysis.target_fraction:.0%} of the best, best of {contenders} / {REFERENCE}: "
                     f"median over workloads {median} ({per}; not reached counts as budget + 1 = "
                     f"{_censored_at(analysis)})")
    if s.speedup_vs_baseline:
        per = ", ".join(f"{w} {'-' if r is None else f'{r:.3f}'}" for w, r in s.speedup_vs_baseline.items())
        verdict = {True: "beats", False: "does not beat", None: "-"}[s.beats_baseline]
        median = "-" if s.median_speedup_vs_baseline is None else f"{s.median_speedup_vs_baseline:.3f}"
        lines.append(f"final speedup, best of {contenders} / {BASELINE}: median over workloads {median} "
                     f"({per}) -> {verdict} the baseline")
    lines += [f"note: {note}" for note in s.notes]
    return lines


def _censored_at(analysis: CampaignAnalysis) -> str:
    if analysis.reference_budget == analysis.budget:
        return str(analysis.budget + 1)
    return f"{analysis.budget + 1}, {REFERENCE} {analysis.reference_budget + 1}"


def _budgets(analysis: CampaignAnalysis) -> str:
    if analysis.reference_budget == analysis.budget:
        return f"at a budget of {analysis.budget} configs"
    return (f"at a budget of {analysis.budget} configs ({REFERENCE}: {analysis.reference_budget}, so that its "
            "trials to the target are measured rather than capped at the others' budget)")


def campaign_report(analysis: CampaignAnalysis, command: str, wall_s: float) -> Report:
    """The report: the command, the summary, and per workload a table and convergence figure."""
    from xtat.report import (
        ConvergenceSeries,
        Figure,
        Paragraph,
        Preformatted,
        Report,
        Section,
        Table,
        convergence_figure,
    )

    method = Paragraph(
        f"Every strategy ran on every workload with every seed {_budgets(analysis)} "
        "(the default is config 1), each run in its own store. A run's incumbent after a trial is its fastest "
        "verified config so far by search timing. After the runs, every incumbent of every run on a workload "
        "was measured again side by side, interleaved with the default round by round in fresh workers; the "
        "best-so-far speedup after a trial is its incumbent's re-measured speedup (where a workload was not "
        "re-measured, its caption says so and the search timing is used: reference / fastest median so far, "
        "the reference being the median of the runs' default measurements). The target is "
        f"{analysis.target_fraction:.0%} of the best speedup any run found on the workload; trials and wall "
        "time (trial costs summed) to reach it are medians over seeds, 'not reached' when half the seeds or "
        "more did not reach it. The final speedup is the tuner's result: its finalists re-measured "
        "interleaved with the default in a fresh process (median over seeds, seeds' range); adopted counts "
        f"the seeds whose result was significant. {BASELINE} is Optuna TPE over XLA options only (the "
        "codegen stage).")
    sections = [Section("Campaign", (Preformatted(command), method,
                                     Paragraph(f"Campaign wall time {wall_s:.1f} s."))),
                Section("Summary", tuple(Paragraph(line) for line in summary_lines(analysis)))]
    for index, w in enumerate(analysis.workloads):
        series = [ConvergenceSeries(s.strategy, tuple(t for t, _ in s.by_trials), (), tuple(v for _, v in s.by_trials),
                                    by_wall=s.by_wall) for s in w.strategies]
        figure = convergence_figure(series, title=f"{w.workload}: best-so-far speedup, median over seeds",
                                    measured_by="incumbent re-measured" if w.remeasured else "search timing")
        sections.append(Section(w.workload, (
            Table(STRATEGY_COLUMNS, tuple(strategy_cells(s) for s in w.strategies), caption=workload_caption(w)),
            Figure(f"convergence-{index + 1}", figure, caption=f"{w.workload}: best-so-far speedup against "
                   "configs considered and against search time, one line per strategy (median over seeds)"),
        )))
    return Report("xtat compare: strategies at equal budget", tuple(sections))
