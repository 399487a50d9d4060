"""Reports on stored runs: one self-contained HTML file (inline CSS and SVG charts) or Markdown.

Charts need matplotlib (``pip install evalsi[reports]``); without it the HTML report says so
and shows the numbers alone.
"""

from evalsi.reports._data import gather_report
from evalsi.reports._render import ReportFormat, check_output_path, render_report, write_report

__all__ = [
    "ReportFormat",
    "check_output_path",
    "gather_report",
    "render_report",
    "write_report",
]
