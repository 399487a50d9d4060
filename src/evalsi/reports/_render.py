"""``render_report``: a run as one self-contained HTML file or as GitHub-flavoured Markdown."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from evalsi.core import UserError
from evalsi.reports._charts import NO_CHARTS, Charts, build_charts
from evalsi.reports._data import ReportData, gather_report
from evalsi.reports._format import FILTERS, GLOBALS, pretty_json
from evalsi.reports._markdown import render_markdown
from evalsi.runs import open_store
from evalsi.store import SqlStore

if TYPE_CHECKING:
    import jinja2

ReportFormat = Literal["html", "md"]
StoreLike = SqlStore | str | os.PathLike[str] | None
FORMATS: Final = ("html", "md")


def render_report(
    store: StoreLike,
    run_id: str,
    *,
    fmt: ReportFormat,
    by: str | None = None,
    compare: str | None = None,
    failures: int = 20,
    summary: bool = False,
) -> str:
    """Render one stored run as a report.

    HTML is one self-contained file: inline CSS, charts as inline SVG (with
    ``pip install evalsi[reports]``), no scripts and nothing fetched from the network; every
    value that came from the user is escaped. Markdown has the same sections as tables.

    Args:
        store: An open ``SqlStore``, a SQLite path or URL, or None for ``.evalsi/evalsi.db``.
        run_id: The run: an id, a unique id prefix, or ``latest``.
        fmt: ``"html"`` or ``"md"``.
        by: A metadata key to slice every metric by (the run's dataset is read again for it).
        compare: The baseline run A to compare this run (B) with; deltas are B − A, as
            ``evalsi compare A B`` gives them.
        failures: How many failing records to show (0: none).
        summary: Markdown only: the run's line, metrics, gates and comparison, short enough
            for a pull-request comment.

    Raises:
        UserError: An unknown run, an unknown format, a bad ``by`` or ``failures``.

    Example:
        >>> import evalsi
        >>> from evalsi.store import SqlStore
        >>> store = SqlStore.open(":memory:")
        >>> rows = [{"id": "a", "output": "4", "reference": "4"},
        ...         {"id": "b", "output": "5", "reference": "4"}]
        >>> run = evalsi.evaluate(rows, ["exact-match"], store=store).run_id
        >>> md = render_report(store, run, fmt="md")
        >>> "| exact-match | exact-match | 2 | 0.500 |" in md
        True
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown report format {fmt!r}", hint="use html or md")
    if summary and fmt != "md":
        raise UserError("a summary report is Markdown only", hint="add --format md")
    owned = not isinstance(store, SqlStore)
    db = open_store(store, create=False)
    try:
        data = gather_report(db, run_id, by=by, compare=compare, failures=failures)
    finally:
        if owned:
            db.close()
    if fmt == "md":
        return render_markdown(data, summary=summary)
    return render_html(data)


def render_html(data: ReportData) -> str:
    from markupsafe import Markup

    from evalsi.core import VERSION

    charts = build_charts(data)
    svg = _svgs(charts, Markup)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            data=data,
            run=data.run,
            svg=svg,
            charts_available=charts.available,
            no_charts=NO_CHARTS,
            manifest_json=pretty_json(data.run.manifest),
            spec_json=pretty_json(data.run.spec),
            evalsi_version=VERSION,
        )
    )


def _svgs(charts: Charts, markup: Any) -> dict[str, Any]:
    # matplotlib wrote these (text inside is XML-escaped by its SVG backend): safe to inline.
    out: dict[str, Any] = {
        name: markup(svg) if (svg := getattr(charts, name)) else None
        for name in ("ci", "outcomes", "compare")
    }
    out["histograms"] = {k: markup(v) for k, v in charts.histograms.items()}
    return out


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("evalsi.reports", "templates"),
        autoescape=True,  # everything user-provided is escaped, whatever the template name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals.update(GLOBALS)
    return env


# -- writing ----------------------------------------------------------------------------------


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """Fail early, naming the path, when a report cannot be written there."""
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise UserError(f"-o {path}: is a directory; give a file name such as report.html")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise UserError(f"-o {path}: cannot write the report there: {parent} {what}")
    if not os.access(parent, os.W_OK):
        raise UserError(f"-o {path}: cannot write the report there: {parent} is not writable")
    return target


def write_report(text: str, path: str | os.PathLike[str]) -> Path:
    """Write ``text`` to ``path`` atomically (a half-written report never replaces a whole one).

    Raises:
        UserError: The path cannot be written; the message names it.
    """
    target = check_output_path(path)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise UserError(f"-o {path}: cannot write the report: {e.strerror or e}") from e
    return target
