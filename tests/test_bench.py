"""`xtat bench` and the report layer: writer on synthetic data, statistics, one real campaign."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from xtat.report import (ConvergenceSeries, Figure, Paragraph, Preformatted, Report, RooflinePoint, Section,
                         SpeedupBar, StageShares, Table, TrialPoint, ablation_figure, convergence_figure,
                         roofline_figure, speedup_figure, write_report)
from xtat.report.figures import is_png


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
