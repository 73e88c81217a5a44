"""The report's figures: matplotlib (Agg, no display) rendered to PNG bytes.

Each function takes plain records and returns the PNG file's bytes, so a
figure can be saved beside a Markdown file or embedded in HTML alike
(`xtat.report.document`). Nothing here measures anything: callers pass what
they measured.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

try:
    import matplotlib
except ImportError as exc:  # the report extra
    from xtat.core.errors import UserError

    raise UserError("reports draw their figures with matplotlib: pip install 'xtat[report]'") from exc

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from xtat.tuning.result import TrialPoint

DPI = 110


@dataclass(frozen=True)
class ConvergenceSeries:
    """Best-so-far speedup of one search over its default, per considered config."""

    name: str
    trials: tuple[int, ...]  # 1, 2, ... : configs considered so far
    wall_s: tuple[float, ...]  # cumulative trial cost at each config
    best_speedup: tuple[float, ...]  # default time / best time so far
    # (wall time, speedup) on a grid of its own, for medians over runs whose times differ
    # (`xtat compare`); empty: the wall-time panel draws wall_s against best_speedup.
    by_wall: tuple[tuple[float, float], ...] = ()

    @classmethod
    def from_trials(cls, name: str, points: Sequence[TrialPoint], default_s: float | None = None
                    ) -> ConvergenceSeries:
        """The series of a search whose first point is its default config (the tuner's order).

        `default_s` overrides the baseline; by default it is the first point's time.
        """
        baseline = default_s if default_s is not None else (points[0].median_s if points else None)
        trials, wall, best = [], [], []
        spent, fastest = 0.0, math.inf
        for index, point in enumerate(points, start=1):
            spent += point.spent_s
            if point.median_s is not None:
                fastest = min(fastest, point.median_s)
            if baseline is None or not math.isfinite(fastest):
                continue  # nothing verified yet: no speedup to draw
            trials.append(index)
            wall.append(spent)
            best.append(baseline / fastest)
        return cls(name, tuple(trials), tuple(wall), tuple(best))


@dataclass(frozen=True)
class SpeedupBar:
    label: str
    speedup: float
    low: float  # 95% interval
    high: float
    adopted: bool


@dataclass(frozen=True)
class StageShares:
    """One workload's ablation: each stage's share of its adopted speedup."""

    label: str
    shares: dict[str, float]  # stage -> share of (speedup - 1); need not sum to 1
    interaction: float  # the rest: 1 - sum(shares)


@dataclass(frozen=True)
class RooflinePoint:
    """One workload on the roofline: its arithmetic intensity and achieved rates."""

    label: str
    intensity: float  # FLOPs per byte accessed (cost analysis of the default program)
    default_flops_per_s: float
    tuned_flops_per_s: float


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _colors(count: int) -> list:
    cmap = plt.get_cmap("tab10" if count <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(count)]


def convergence_figure(series: Sequence[ConvergenceSeries], title: str = "Convergence",
                       measured_by: str = "search timing") -> bytes:
    """Two panels: best-so-far speedup vs configs considered, and vs search wall time.

    Pass one series per search (a workload, or a strategy in a comparison);
    their names form the legend. `measured_by` says where the speedups come from.
    """
    figure, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for s, color in zip(series, _colors(len(series))):
        by_trial.step(s.trials, s.best_speedup, where="post", color=color, label=s.name, marker="o", markersize=3)
        wall, speedup = zip(*s.by_wall) if s.by_wall else (s.wall_s, s.best_speedup)
        # Markers show each config (a step's last change is only a vertical line); a grid has none.
        by_time.step(wall, speedup, where="post", color=color, label=s.name, marker=None if s.by_wall else "o",
                     markersize=3)
    for axis, label in ((by_trial, "configs considered"), (by_time, "search time (s, trial costs summed)")):
        axis.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    by_trial.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_trial.set_ylabel(f"best speedup so far ({measured_by})")
    figure.suptitle(title)
    if series:
        by_time.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
                       ncol=1 if len(series) <= 16 else 2, frameon=False)
    return _png(figure)


def speedup_figure(bars: Sequence[SpeedupBar], title: str = "Speedup over XLA's default") -> bytes:
    """Horizontal bars of speedup with 95% interval whiskers; adopted ones filled."""
    height = max(2.0, 0.32 * len(bars) + 1.2)
    figure, axis = plt.subplots(figsize=(8, height))
    positions = list(range(len(bars)))[::-1]  # first bar on top
    for y, bar in zip(positions, bars):
        axis.barh(y, bar.speedup - 1.0, left=1.0, height=0.6,
                  color="tab:green" if bar.adopted else "lightgrey",
                  edgecolor="tab:green" if bar.adopted else "grey")
        axis.errorbar(bar.speedup, y, xerr=[[bar.speedup - bar.low], [bar.high - bar.speedup]],
                      fmt="none", ecolor="black", capsize=3, linewidth=1)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_yticks(positions, [bar.label for bar in bars])
    axis.set_xlabel("speedup (default time / tuned time), 95% interval; green: adopted")
    axis.set_title(title)
    axis.grid(axis="x", alpha=0.3)
    return _png(figure)


def ablation_figure(rows: Sequence[StageShares], title: str = "Share of the speedup per stage") -> bytes:
    """Grouped bars: for each workload, each stage's share of its speedup and the interaction."""
    stages = sorted({stage for row in rows for stage in row.shares})
    groups = [*stages, "interaction"]
    width = 0.8 / max(len(groups), 1)
    figure, axis = plt.subplots(figsize=(max(6.0, 1.1 * len(rows) + 3), 4.2))
    for g, (group, color) in enumerate(zip(groups, _colors(len(groups)))):
        values = [row.interaction if group == "interaction" else row.shares.get(group, 0.0) for row in rows]
        offsets = [i + (g - (len(groups) - 1) / 2) * width for i in range(len(rows))]
        axis.bar(offsets, values, width=width, color=color, label=group)
    axis.axhline(0.0, color="black", linewidth=0.8)
    axis.set_xticks(range(len(rows)), [row.label for row in rows], rotation=30, ha="right")
    axis.set_ylabel("share of (speedup - 1) lost without the stage")
    axis.set_title(title)
    axis.grid(axis="y", alpha=0.3)
    if groups:
        axis.legend(fontsize="small", frameon=False)
    return _png(figure)


def roofline_figure(peak_flops_per_s: float, peak_bytes_per_s: float, points: Sequence[RooflinePoint],
                    title: str = "Roofline") -> bytes:
    """Log-log roofline: min(peak FLOP/s, intensity x bandwidth), each workload's default
    (hollow) and tuned (filled) achieved FLOP/s at its arithmetic intensity."""
    figure, axis = plt.subplots(figsize=(8, 5))
    ridge = peak_flops_per_s / peak_bytes_per_s
    intensities = [p.intensity for p in points if p.intensity > 0]
    low = min([ridge / 100, *intensities]) / 2
    high = max([ridge * 100, *intensities]) * 2
    xs = [low * (high / low) ** (i / 200) for i in range(201)]
    axis.loglog(xs, [min(peak_flops_per_s, x * peak_bytes_per_s) for x in xs], color="black", linewidth=1.5,
                label=f"roof: {peak_flops_per_s / 1e9:.1f} GFLOP/s, {peak_bytes_per_s / 1e9:.1f} GB/s")
    for point, color in zip(points, _colors(len(points))):
        if point.intensity <= 0:
            continue
        axis.plot([point.intensity] * 2, [point.default_flops_per_s, point.tuned_flops_per_s], color=color,
                  linewidth=1)
        axis.scatter([point.intensity], [point.default_flops_per_s], facecolors="none", edgecolors=[color], s=40)
        axis.scatter([point.intensity], [point.tuned_flops_per_s], color=color, s=40, label=point.label)
    axis.set_xlabel("arithmetic intensity (FLOP / byte accessed)")
    axis.set_ylabel("achieved FLOP/s (hollow: default, filled: tuned)")
    axis.set_title(title)
    axis.grid(which="both", alpha=0.25)
    axis.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    return _png(figure)


def is_png(data: bytes) -> bool:
    """Whether `data` starts like a PNG file."""
    return data[:8] == b"\x89PNG\r\n\x1a\n"


def rounds_figure(plain_s: Sequence[float], tuned_s: Sequence[float],
                  title: str = "Whole runs, round by round") -> bytes:
    """Each round's wall time of the plain run and of the run under `xtat run`, side by side, with
    each side's median as a line: the figure behind an end-to-end speedup."""
    figure, axis = plt.subplots(figsize=(8, 3.6))
    rounds = range(1, len(plain_s) + 1)
    for values, label, color in ((plain_s, "plain", "tab:grey"), (tuned_s, "under xtat run", "tab:green")):
        axis.plot(rounds, values, marker="o", linestyle="none", color=color, label=label)
        axis.axhline(sorted(values)[len(values) // 2], color=color, linewidth=0.8, linestyle="--")
    axis.set_xlabel("round (the two runs of a round ran one after the other, in random order)")
    axis.set_ylabel("wall time (s)")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(frameon=False)
    return _png(figure)
