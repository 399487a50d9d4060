"""The pytest plugin (entry point ``pytest11: evalsi``): evaluations as tests.

``evalsi_eval(data, evaluators, **options)`` is ``evalsi.evaluate`` with the session's store
and the test's node id as the run's name; ``assert_metric`` / ``assert_gates`` turn its
statistics into assertions. Without ``--evalsi`` the runs live in one in-memory store for the
session; with it they go to the result store (``--evalsi-store``, default
``.evalsi/evalsi.db``), where ``evalsi runs list`` shows them, and the session ends with a
line per run. ``--evalsi-report FILE`` writes each run's ``evalsi report --summary`` there.

pytest loads this module in every session of an environment where evalsi is installed, so it
imports nothing of evalsi until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from evalsi.runs import ScoreResult
    from evalsi.store import SqlStore

DEFAULT_STORE = ".evalsi/evalsi.db"


@dataclass(frozen=True, slots=True)
class _Stored:
    test: str
    run_id: str
    records: int
    gates: dict[str, int]
    in_session_store: bool


@dataclass
class _Session:
    """The session's store (opened on first use) and the runs its tests made."""

    persist: bool
    location: str
    report: str | None
    runs: list[_Stored] = field(default_factory=list)
    _store: SqlStore | None = None

    def store(self) -> SqlStore:
        if self._store is None:
            from evalsi.store import SqlStore

            self._store = SqlStore.open(self.location if self.persist else ":memory:")
        return self._store

    def add(self, test: str, result: ScoreResult, in_session_store: bool) -> None:
        gates: dict[str, int] = {}
        for g in result.gates:
            verdict = str(g.get("verdict") or ("passed" if g.get("passed") else "failed"))
            gates[verdict] = gates.get(verdict, 0) + 1
        self.runs.append(_Stored(test, result.run_id, result.records, gates, in_session_store))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalsi", "evalsi: evaluations as tests (the evalsi_eval fixture)")
    group.addoption(
        "--evalsi",
        action="store_true",
        help="store the runs of evalsi_eval in the result store (see `evalsi runs list`) and "
        "list them at the end of the session",
    )
    group.addoption(
        "--evalsi-store",
        metavar="PATH",
        help=f"the result store for --evalsi (default: {DEFAULT_STORE}); implies --evalsi",
    )
    group.addoption(
        "--evalsi-report",
        metavar="FILE",
        help="write each run's `evalsi report --summary` (Markdown) to FILE; implies --evalsi",
    )


def pytest_configure(config: pytest.Config) -> None:
    store = config.getoption("--evalsi-store")
    report = config.getoption("--evalsi-report")
    persist = bool(config.getoption("--evalsi") or store or report)
    location = str(Path(store or DEFAULT_STORE).absolute())
    report_path = str(Path(report).absolute()) if report else None
    config.stash[_SESSION] = _Session(persist, location, report_path)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()


@pytest.fixture
def evalsi_eval(request: pytest.FixtureRequest) -> Callable[..., ScoreResult]:
    """``evalsi_eval(data, evaluators, **options)``: ``evalsi.evaluate`` into the session's
    store, the run named after the test (``options`` as ``evaluate`` takes them).

    Example::

        def test_answers(evalsi_eval):
            result = evalsi_eval("qa.jsonl", ["exact-match"])
            assert_metric(result, "exact-match", ">=", 0.8, strict=True)
    """
    session = request.config.stash[_SESSION]
    test = request.node.nodeid

    def evaluate(data: Any, evaluators: Iterable[Any], **options: Any) -> ScoreResult:
        __tracebackhide__ = True
        import evalsi

        own = "store" not in options
        if own:
            options["store"] = session.store()
        options.setdefault("name", test)
        result = evalsi.evaluate(data, evaluators, **options)
        session.add(test, result, own)
        return result

    return evaluate


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or not session.runs:
        return
    tr = terminalreporter
    if session.persist:
        tr.write_sep("-", "evalsi")
        for run in session.runs:
            gates = ", ".join(f"{n} {v}" for v, n in sorted(run.gates.items())) or "no gates"
            tr.write_line(f"{run.run_id}  {run.test}  {run.records} records, {gates}")
        if session.report:
            _write_report(session)
            tr.write_line(f"evalsi: wrote {session.report}")
    where = (
        f"stored in {session.location} (`evalsi runs list`)"
        if session.persist
        else "in memory (pytest --evalsi stores them)"
    )
    totals: dict[str, int] = {}
    for run in session.runs:
        for verdict, n in run.gates.items():
            totals[verdict] = totals.get(verdict, 0) + n
    gates = ", ".join(f"{n} {v}" for v, n in sorted(totals.items())) or "no gates"
    count = len(session.runs)
    tr.write_line(f"evalsi: {count} run{'s' * (count != 1)} {where}; gates: {gates}")


def _write_report(session: _Session) -> None:
    """The runs' summary reports, one renderer (``evalsi report --format md --summary``)."""
    from evalsi.reports import render_report, write_report

    parts = [
        render_report(session.store(), run.run_id, fmt="md", summary=True)
        for run in session.runs
        if run.in_session_store
    ]
    write_report("\n".join(parts), session.report or "")
