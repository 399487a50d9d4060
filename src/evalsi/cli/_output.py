"""Printing: JSON alone on stdout for machines, tables for people, messages on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import orjson

FORMATS = ("table", "json", "md")


def fail(message: str, code: int) -> int:
    """Print a one-line (plus hint) error to stderr and return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


def note(message: str) -> None:
    print(message, file=sys.stderr)


def print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "") -> None:
    """A rich table on a terminal; aligned plain text otherwise (logs, pipes, CI)."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title or None, title_justify="left")
        for i, column in enumerate(columns):
            table.add_column(column, justify="right" if i >= 2 else "left")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    from evalsi.runs import render_plain

    if title:
        print(title)
    print(render_plain(columns, rows))


def print_markdown(
    columns: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = ""
) -> None:
    from evalsi.runs import render_markdown

    if title:
        print(f"{title}\n")
    print(render_markdown(columns, rows))


def print_summary(
    fmt: str, title: str, metrics: Sequence[Any], gates: Sequence[Any], isolation: Sequence[Any]
) -> None:
    """A run's tables as every command prints them: metrics, then sandbox isolation (when
    anything ran sandboxed), then gates; ``fmt`` ``md`` for Markdown, else plain text."""
    from evalsi.runs import (
        GATE_COLUMNS,
        ISOLATION_COLUMNS,
        gate_rows,
        isolation_rows,
        metric_columns,
        metric_rows,
    )

    printer = print_markdown if fmt == "md" else print_table
    printer(metric_columns(metrics), metric_rows(list(metrics)), title=title)
    if isolation:
        print()
        printer(ISOLATION_COLUMNS, isolation_rows(isolation), title="sandbox isolation")
    if gates:
        print()
        printer(GATE_COLUMNS, gate_rows(gates), title="gates")


def add_failures_flag(parser: Any) -> None:
    """``--show-failures N``: how many failing results the output lists, with their reasons."""
    parser.add_argument(
        "--show-failures",
        type=int,
        default=5,
        metavar="N",
        help="list the first N failing results and why (expected vs got, value vs budget, the "
        'error); in --format json under "failures"; 0 lists none (default: 5)',
    )


def failures_of(result: Any, limit: int) -> list[Any] | None:
    """The first ``limit`` failing results of a finished run, local or on a server (read from
    the results it sent or lists); None for a plan or a result attached to nothing."""
    if not getattr(result, "has_results", False) or getattr(result, "plan", None) is not None:
        return None
    return list(result.failures(limit))


def print_failures(
    fmt: str, failures: Sequence[Any] | None, limit: int, flag: str = "--show-failures"
) -> None:
    """The failing results after the metrics, one line each: record, metric, why."""
    if not failures:
        return
    from evalsi.runs import FAILURE_COLUMNS, failure_rows

    printer = print_markdown if fmt == "md" else print_table
    print()
    title = "failures"
    if len(failures) >= limit:
        title += f" (the first {limit}; {flag} N lists more)"
    printer(FAILURE_COLUMNS, failure_rows(failures), title=title)


def with_failures(data: dict[str, Any], result: Any, limit: int) -> dict[str, Any]:
    """A result's JSON ``data`` with its first ``limit`` failures, when it has results."""
    if (failures := failures_of(result, limit)) is not None:
        data["failures"] = [f.to_dict() for f in failures]
    return data


def print_result(fmt: str, title: str, result: Any, limit: int) -> None:
    """A finished result: the title, metrics, gates and isolation, then its failures."""
    print_summary(fmt, title, result.metrics, result.gates, result.isolation)
    print_failures(fmt, failures_of(result, limit), limit)


def add_by_flag(parser: Any, default: str | None) -> None:
    """``--by KEY``: the metadata key whose values group samples into categories."""
    parser.add_argument(
        "--by",
        default=default,
        metavar="KEY",
        help="per-category tables by the samples' metadata.KEY"
        + (f" (default: {default}; shown when a sample has it)" if default else "")
        + '; in --format json under "categories"',
    )


def print_categories(fmt: str, categories: Sequence[Any]) -> None:
    """One table per category after the run's own: n, mean and interval per metric, and
    pass@k / pass^k with trials."""
    from evalsi.runs import category_columns, category_rows, category_title

    printer = print_markdown if fmt == "md" else print_table
    for category in categories:
        print()
        printer(category_columns(category), category_rows(category), title=category_title(category))
