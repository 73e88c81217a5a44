"""One small report model, written as Markdown (figures beside it) and as one
self-contained HTML file (figures embedded as base64 data URIs).

A report is a title and sections; a section holds blocks in order:
`Paragraph`, `Preformatted`, `Table`, `Figure`. Text is plain: it is escaped
in HTML and written as is in Markdown, so numbers and names survive both.
The HTML references nothing outside itself (no scripts, fonts or styles from
the network), so it opens offline and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from xtat.report.figures import is_png


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Preformatted:
    """Verbatim text: a command line, its output, a config."""

    text: str


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""

    def __post_init__(self) -> None:
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if bad:
            raise ValueError(f"table {self.caption!r}: rows {bad} do not have {len(self.columns)} cells")


@dataclass(frozen=True)
class Figure:
    name: str  # file stem of the PNG beside report.md: letters, digits, '-', '_'
    png: bytes
    caption: str = ""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", self.name):
            raise ValueError(f"figure name {self.name!r}: use letters, digits, '-' and '_' only")
        if not is_png(self.png):
            raise ValueError(f"figure {self.name!r} is not PNG data")


Block = Paragraph | Preformatted | Table | Figure


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Report:
    title: str
    sections: tuple[Section, ...] = ()

    @property
    def figures(self) -> list[Figure]:
        return [block for section in self.sections for block in section.blocks if isinstance(block, Figure)]

    def __post_init__(self) -> None:
        names = [figure.name for figure in self.figures]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"report {self.title!r}: figure names used twice: {duplicates}")


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    figures: list[Path] = field(default_factory=list)


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    """Markdown text; figures are referenced as NAME.png beside the file."""
    lines = [f"# {report.title}", ""]
    for section in report.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Paragraph):
                lines += [block.text, ""]
            elif isinstance(block, Preformatted):
                lines += ["```", block.text.rstrip("\n"), "```", ""]
            elif isinstance(block, Table):
                if block.caption:
                    lines += [f"*{block.caption}*", ""]
                lines.append("| " + " | ".join(_markdown_cell(c) for c in block.columns) + " |")
                lines.append("|" + "---|" * len(block.columns))
                lines += ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in block.rows]
                lines.append("")
            else:
                lines += [f"![{_markdown_cell(block.caption or block.name)}]({block.name}.png)", ""]
                if block.caption:
                    lines += [f"*{block.caption}*", ""]
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: 1em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr:nth-child(even) td { background: #fafafa; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-style: italic; color: #555; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
"""


def to_html(report: Report) -> str:
    """One self-contained HTML document; every figure is a data: URI."""
    escape = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{escape(report.title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
             f"<h1>{escape(report.title)}</h1>"]
    for section in report.sections:
        parts.append(f"<section><h2>{escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Paragraph):
                parts.append(f"<p>{escape(block.text)}</p>")
            elif isinstance(block, Preformatted):
                parts.append(f"<pre>{escape(block.text)}</pre>")
            elif isinstance(block, Table):
                parts.append("<table>")
                if block.caption:
                    parts.append(f"<caption>{escape(block.caption)}</caption>")
                parts.append("<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in block.columns)
                             + "</tr></thead><tbody>")
                parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in block.rows]
                parts.append("</tbody></table>")
            else:
                data = base64.b64encode(block.png).decode("ascii")
                parts.append(f'<figure id="{block.name}"><img alt="{escape(block.caption or block.name)}" '
                             f'src="data:image/png;base64,{data}">'
                             + (f"<figcaption>{escape(block.caption)}</figcaption>" if block.caption else "")
                             + "</figure>")
        parts.append("</section>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def write_report(report: Report, directory: str | Path) -> ReportFiles:
    """Write DIRECTORY/report.md with NAME.png per figure beside it, and DIRECTORY/report.html."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for figure in report.figures:
        path = folder / f"{figure.name}.png"
        path.write_bytes(figure.png)
        figures.append(path)
    markdown = folder / "report.md"
    markdown.write_text(to_markdown(report))
    page = folder / "report.html"
    page.write_text(to_html(report))
    return ReportFiles(markdown, page, figures)
