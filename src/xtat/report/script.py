"""The user's own figure as a report (`xtat run --compare N --report DIR`): the whole script plain
and under `xtat run`, the programs' shares and adopted speedups, and what those predict."""

from __future__ import annotations

from statistics import median as _median

from xtat.profile.figure import ScriptFigure
from xtat.report.document import Figure, Paragraph, Preformatted, Report, Section, Table
from xtat.report.figures import rounds_figure


def script_report(figure: ScriptFigure, command: list[str], profile_name: str | None) -> Report:
    ratio, low, high = figure.speedup
    predicted = "-" if figure.predicted is None else f"{figure.predicted:.3f}x"
    summary = Table(
        ("plain s (median)", "xtat run s (median)", "speedup [95% CI]", "predicted by the profile"),
        ((f"{_median(figure.plain_s):.3f}", f"{_median(figure.tuned_s):.3f}", f"{ratio:.3f}x [{low:.3f}, {high:.3f}]",
          predicted),),
        caption=f"{figure.rounds} alternating rounds in fresh processes, output discarded")
    rounds = Table(("round", "plain s", "xtat run s", "ratio"),
                   tuple((str(i + 1), f"{p:.3f}", f"{t:.3f}", f"{p / t:.3f}")
                         for i, (p, t) in enumerate(zip(figure.plain_s, figure.tuned_s))))
    blocks: list = [Preformatted(" ".join(command)), summary,
                    Paragraph("The speedup is the median of the rounds' ratios (plain over xtat run), with its exact "
                              "95% interval. The prediction: a program with share f of the plain script's time whose "
                              "adopted config is s times faster saves f (1 - 1/s) of it."),
                    Figure("rounds", rounds_figure(figure.plain_s, figure.tuned_s), "each round's two wall times; "
                           "dashed: the medians"), rounds]
    sections = [Section("The whole script", tuple(blocks))]
    if figure.programs:
        programs = Table(("program", "share", "adopted speedup", "store says", "fingerprint"),
                         tuple((g.name, f"{g.share:.1%}", f"{g.speedup:.3f}x", g.found, g.fingerprint[:12])
                               for g in figure.programs),
                         caption=f"profile {profile_name!r}: each program's share of the plain script's time")
        sections.append(Section("Its programs", (programs,)))
    return Report(f"xtat run against the plain script: {ratio:.3f}x", tuple(sections))
