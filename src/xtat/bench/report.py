"""The campaign's report: tables and figures of a BenchResult as an `xtat.report.Report`."""

from __future__ import annotations

import json

from xtat.bench.campaign import BenchResult, GeometricMean, Outcome
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
    ablation_figure,
    convergence_figure,
    roofline_figure,
    speedup_figure,
)


def _interval(value: float | None, ci: tuple[float, float] | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {n}" for status, n in counts.items()) or "-"


def _geomean(label: str, mean: GeometricMean | None) -> str:
    if mean is None:
        return f"{label}: no workload was tuned."
    return (f"{label}: {mean.value:.3f}x, bootstrap 95% interval over the {mean.count} tuned workload(s) "
            f"[{mean.low:.3f}, {mean.high:.3f}].")


def _summary(result: BenchResult) -> Section:
    s = result.settings
    tuned = [o for o in result.outcomes if o.tuned]
    failed = [o for o in result.outcomes if not o.tuned]
    adopted = [o for o in tuned if o.adopted]
    limit = " and ".join(part for part in (f"budget {s.budget} configs" if s.budget else "",
                                           f"{s.time_per_workload_s:g} s of search" if s.time_per_workload_s else "")
                         if part)
    command = (f"xtat bench --suite {','.join(s.suite) or 'all'} --size {s.size} --forms {','.join(s.forms)}"
               + (f" --budget {s.budget}" if s.budget else "")
               + (f" --time-per-workload {s.time_per_workload_s:g}" if s.time_per_workload_s else "")
               + f" --seed {s.seed} --rounds {s.rounds}")
    top = sorted(adopted, key=lambda o: -o.delivered_speedup)[:3]
    blocks: list = [
        Paragraph(f"{len(result.outcomes)} workload(s) at size {s.size} ({', '.join(s.forms)}), each with {limit}: "
                  f"{len(tuned)} tuned, {len(adopted)} with an adopted config, {len(failed)} failed. "
                  f"Campaign wall time {result.wall_s:.0f} s"
                  + (f"; {read_back} workload(s) read back from an earlier run of this campaign (bench.json)."
                     if (read_back := sum(o.read_back for o in result.outcomes)) else ".")),
        Paragraph(_geomean("Geometric-mean speedup delivered (the default counts as 1.0 where nothing was "
                           "adopted)", result.delivered)),
        Paragraph(_geomean("Geometric-mean speedup of the best finalist, adopted or not", result.best_found)),
    ]
    if top:
        blocks.append(Paragraph("Largest adopted speedups: " + "; ".join(
            f"{o.name} {_interval(o.speedup, o.speedup_ci)}" for o in top) + "."))
    blocks += [Paragraph("Times are medians of interleaved re-measurements in fresh worker processes. The "
                         "best finalist is confirmed through jax.jit, interleaved with the default, until its "
                         "interval clears or falls below 1 + the tie margin; a config is adopted only when the "
                         "confirmed interval lies above it, and the speedups quoted are the confirmed ones."),
               Preformatted(command)]
    return Section("Summary", tuple(blocks))


def _workload_table(outcomes: tuple[Outcome, ...]) -> Table:
    rows = []
    for o in outcomes:
        if not o.tuned:
            rows.append((o.name, "-", "-", "-", "-", "failed", "-", "-", o.error or ""))
            continue
        confirmed = "-" if o.search_speedup is None else _interval(o.speedup, o.speedup_ci) + (
            " (interval includes 1)" if o.speedup_ci and o.speedup_ci[0] <= 1.0 else "")
        search = _interval(o.search_speedup, o.search_speedup_ci) if o.search_speedup is not None else \
            _interval(o.speedup, o.speedup_ci)
        rows.append((o.name, _interval(o.default_ms, o.default_ci_ms), _interval(o.tuned_ms, o.best_ci_ms
                                                                                 if o.adopted else o.default_ci_ms),
                     search, confirmed, "yes" if o.adopted else "no", _statuses(o.trials),
                     _statuses(o.failures()), o.message))
    return Table(("workload", "default ms [95% CI]", "tuned ms [95% CI]", "search speedup [95% CI]",
                  "confirmed speedup [95% CI]", "adopted", "trials by status", "failures", "outcome"), tuple(rows),
                 "Per workload; 'tuned' is the adopted config, or the default where none was adopted. 'search' is "
                 "the best finalist re-measured beside the default after the search; 'confirmed' is the same config "
                 "deployed through jax.jit in fresh processes, timed interleaved with the default until the decision "
                 "was clear (tuning/confirmation.py): the figure adoption and the geometric means use.")


def _convergence(outcomes: tuple[Outcome, ...], forms: tuple[str, ...]) -> list[Figure]:
    figures = []
    for form in forms:
        series = [ConvergenceSeries.from_trials(o.entry, list(o.history))
                  for o in outcomes if o.tuned and o.form == form and o.history]
        if series:
            figures.append(Figure(f"convergence-{form}", convergence_figure(series, f"Convergence ({form})"),
                                  f"{form}: best-so-far speedup of each search over its default, in the search's "
                                  "own timing, against configs considered and against summed trial time"))
    return figures


def _ablation(outcomes: tuple[Outcome, ...]) -> Section:
    explained = [(o.name, o.ablation) for o in outcomes if o.ablation]
    blocks: list = []
    if explained:
        rows = []
        for name, a in explained:
            shares = ", ".join(f"{stage} {share:.0%}" for stage, share in a.stage_shares.items())
            full = a.variants.get("adopted")
            rows.append((name, _interval(full.speedup if full else None, full.speedup_ci if full else None),
                         shares or "-", f"{a.interaction:.0%}", json.dumps(a.config)))
        blocks += [
            Table(("workload", "adopted speedup [95% CI]", "stage shares", "interaction", "config"), tuple(rows),
                  "A stage's share is the part of (speedup - 1) lost when its decisions are reverted, measured "
                  "interleaved with the default in fresh workers."),
            Figure("ablation", ablation_figure([StageShares(name, a.stage_shares, a.interaction)
                                                for name, a in explained]),
                   "Share of each stage in the adopted speedup"),
        ]
    else:
        blocks.append(Paragraph("No workload has an adopted config with a measured ablation: nothing to explain."))
    errors = [(o.name, o.ablation_error) for o in outcomes if o.ablation_error]
    if errors:
        blocks.append(Table(("workload", "ablation error"), tuple(errors)))
    return Section("Ablation: which stage gives the speedup", tuple(blocks))


def _roofline(result: BenchResult) -> Section:
    peak = result.peak
    placed = [(o.name, o.roofline) for o in result.outcomes if o.roofline is not None]
    blocks: list = [Paragraph(
        f"Peaks of this machine ({peak.key.removeprefix('roofline:')}), "
        f"{'measured in this campaign' if result.peak_measured_now else 'measured earlier and read from the store'}"
        f": {peak.flops_per_s / 1e9:.1f} GFLOP/s (f32 matmul, n={peak.matmul_n}) and "
        f"{peak.bytes_per_s / 1e9:.1f} GB/s (streaming read+write of {peak.copy_bytes / 2**20:.0f} MiB), best of "
        f"{peak.repeats}; ridge at {peak.ridge_intensity:.1f} FLOP/byte. Each workload sits at the arithmetic "
        "intensity of its default program from XLA's cost analysis; a program with while loops is left "
        "out (the analysis counts a loop body once), and so is any point that its counts would put above "
        "the roof.")]
    if placed:
        rows = tuple((name, f"{r.flops:.3g}", f"{r.bytes_accessed:.3g}", f"{r.intensity:.2f}",
                      f"{r.default_flops_per_s / 1e9:.2f}", f"{r.tuned_flops_per_s / 1e9:.2f}",
                      f"{r.default_fraction:.1%}", f"{r.tuned_fraction:.1%}") for name, r in placed)
        points = [RooflinePoint(name, r.intensity, r.default_flops_per_s, r.tuned_flops_per_s) for name, r in placed]
        blocks += [
            Table(("workload", "FLOPs", "bytes accessed", "FLOP/byte", "default GFLOP/s", "tuned GFLOP/s",
                   "default of roof", "tuned of roof"), rows),
            Figure("roofline", roofline_figure(peak.flops_per_s, peak.bytes_per_s, points),
                   "Roofline: each workload's default (hollow) and tuned (filled) achieved FLOP/s"),
        ]
    left_out = [(o.name, o.roofline_left_out or "not placed") for o in result.outcomes
                if o.tuned and o.roofline is None]
    if left_out:
        blocks.append(Table(("left out", "why"), tuple(left_out)))
    return Section("Roofline", tuple(blocks))


def bench_report(result: BenchResult) -> Report:
    """The whole campaign as one report: summary, per-workload table, speedups,
    convergence, ablation, roofline and failures."""
    tuned = [o for o in result.outcomes if o.tuned]
    speedups = Section("Speedups", (
        _workload_table(result.outcomes),
        *([Figure("speedup", speedup_figure([SpeedupBar(o.name, o.speedup or 1.0, *(o.speedup_ci or (1.0, 1.0)),
                                                        o.adopted) for o in tuned]),
                  "Best finalist speedup per workload with its 95% interval; green: adopted")] if tuned else []),
    ))
    convergence = _convergence(result.outcomes, result.settings.forms)
    sections = [_summary(result), speedups,
                Section("Convergence", tuple(convergence) or (Paragraph("No search history to draw."),)),
                _ablation(result.outcomes), _roofline(result)]
    failed = [o for o in result.outcomes if not o.tuned]
    if failed:
        sections.append(Section("Failed workloads", (
            Table(("workload", "family", "error"), tuple((o.name, o.family, o.error or "") for o in failed)),)))
    return Report(f"xtat bench: {len(result.outcomes)} suite workload(s), size {result.settings.size}",
                  tuple(sections))
