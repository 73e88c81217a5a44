"""Reports: figures (matplotlib, PNG bytes) and a document model written as
Markdown plus one self-contained HTML file. Used by `xtat bench` and `xtat compare`."""

from xtat.report.document import (
                                  Figure,
                                  Paragraph,
                                  Preformatted,
                                  Report,
                                  ReportFiles,
                                  Section,
                                  Table,
                                  to_html,
                                  to_markdown,
                                  write_report,
)
from xtat.report.figures import (
                                  ConvergenceSeries,
                                  RooflinePoint,
                                  SpeedupBar,
                                  StageShares,
                                  TrialPoint,
                                  ablation_figure,
                                  convergence_figure,
                                  roofline_figure,
                                  speedup_figure,
)

__all__ = [
    "ConvergenceSeries", "Figure", "Paragraph", "Preformatted", "Report", "ReportFiles", "RooflinePoint", "Section",
    "SpeedupBar", "StageShares", "Table", "TrialPoint", "ablation_figure", "convergence_figure", "roofline_figure",
    "speedup_figure", "to_html", "to_markdown", "write_report",
]
