"""``evalsi traces list|show|sessions`` as a user runs them: against a server (``--server``)
and on a local store (``--store``), tables and JSON, the scores an online policy gave the
traces, and bad input refused with exit 2."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalsi._proto.evalsi.v1alpha1.trace_service_connect import TraceServiceASGIApplication
from evalsi.core import STATUS_ERROR, Content, Feedback, Record, Span, SpanLink, Trace
from evalsi.policies import PolicyEngine, policy_from_yaml
from evalsi.server._traces import TraceHandler
from evalsi.store import SqlStore, TraceStore, TraceSummary
from evalsi.traces._mappers import normalize_all
from tests.e2e.conftest import check_user_error, parse_json_stdout
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

Cli = Callable[..., subprocess.CompletedProcess[str]]
S = 1_000_000_000
T0 = 1_700_000_000 * S  # 2023-11-14 22:13:20 UTC


def tid(n: int) -> str:
    return f"{n:032x}"


def sid(n: int) -> str:
    return f"{n:016x}"


POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: quality}
spec:
  cascade:
    - {ref: contains, params: {values: [refund]}}
    - {ref: length, when: "scores.all(s, s.passed)"}
"""
OUTPUTS = {1: "refund issued", 2: "declined"}  # trace 3: not graded


def seed(path: str) -> None:
    """Traces 1..3 in project "default" (3 newest; 2 failed, service "pay"), one in "other";
    policy "quality" graded traces 1 (contains: pass, length 13) and 2 (contains: fail,
    length skipped)."""
    sql = SqlStore.open(path)
    store = TraceStore(sql)
    graded: list[Trace] = []
    for project, numbers in (("default", (1, 2, 3)), ("other", (7,))):
        for n in numbers:
            start = T0 + n * 60 * S
            resource = {"service.name": "pay" if n == 2 else "shop"}
            spans = [
                Span(
                    tid(n),
                    sid(1),
                    name="handle order",
                    start_time_unix_nano=start,
                    end_time_unix_nano=start + 2 * S,
                    attributes={
                        "customer.tier": "gold" if n == 3 else "free",
                        "openinference.span.kind": "AGENT",
                        "agent.name": "order-agent",
                        "session.id": f"s{n % 2}",
                    },
                    resource=resource,
                ),
                Span(
                    tid(n),
                    sid(2),
                    parent_span_id=sid(1),
                    name="chat",
                    start_time_unix_nano=start + S // 10,
                    end_time_unix_nano=start + S,
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
                    resource=resource,
                ),
                Span(
                    tid(n),
                    sid(3),
                    parent_span_id=sid(2),
                    name="execute_tool refund",
                    start_time_unix_nano=start + S // 2,
                    end_time_unix_nano=start + S // 2 + S // 4,
                    status_code=STATUS_ERROR if n == 2 else 1,
                    status_message="card declined" if n == 2 else "",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "refund",
                    },
                    resource=resource,
                    links=[SpanLink(tid(n + 50), sid(9), {"why": "approval"})] if n == 3 else [],
                ),
            ]
            normalize_all(spans)  # as ingest does: the store keeps attributes, not views
            store.write_spans(project, spans)
            summary = TraceSummary.of(
                Trace(tid(n), spans=spans), input_preview=f"order {n}", completed_at=1.0
            )
            store.upsert_trace(project, summary)
            if project == "default" and n in OUTPUTS:
                graded.append(Trace(tid(n), project=project, spans=spans))
    store.add_feedback(
        "default", Feedback(trace_id=tid(3), name="thumbs", value=-1, comment="slow")
    )
    store.close()

    async def grade() -> None:
        engine = PolicyEngine(store=sql, registry=BUILTINS)
        await engine.apply(policy_from_yaml(POLICY, registry=BUILTINS))
        for trace in graded:
            n = int(trace.trace_id, 16)
            await engine.on_trace(
                trace, Record(id=trace.trace_id, output=Content.of_text(OUTPUTS[n]))
            )

    asyncio.run(grade())
    sql.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("traces-server")
    seed(str(tmp / "s.db"))
    state = server_state(tmp, runs=False)
    with serving(state, [(TraceServiceASGIApplication, TraceHandler(state))]) as s:
        yield s.url


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "local.db")
    seed(path)
    return path


def test_list_against_a_server(cli: Cli, server: str) -> None:
    doc = parse_json_stdout(cli("traces", "list", "--server", server, "--format", "json"))
    assert [t["trace_id"] for t in doc["traces"]] == [tid(3), tid(2), tid(1)]
    top = doc["traces"][0]
    assert (top["service"], top["root_name"], top["span_count"]) == ("shop", "handle order", 3)
    assert (top["duration_ms"], top["error"], top["session_id"]) == (2000.0, False, "s1")

    def ids(*flags: str) -> list[str]:
        out = cli("traces", "list", "--server", server, "--format", "json", *flags)
        return [t["trace_id"] for t in parse_json_stdout(out)["traces"]]

    assert ids("--errors") == [tid(2)]
    assert ids("--service", "shop") == [tid(3), tid(1)]
    assert ids("--session", "s1") == [tid(3), tid(1)]
    assert ids("--attr", "customer.tier=gold") == [tid(3)]
    assert ids("--attr", "service.name=pay", "--attr", "customer.tier=free") == [tid(2)]
    assert ids("--since", "2023-11-14T22:15:00", "--until", "2023-11-14T22:16:00") == [tid(2)]
    assert ids("--since", "1h") == []  # all of them are years old
    assert ids("--limit", "1") == [tid(3)]
    assert ids("--project", "other") == [tid(7)]
    table = cli("traces", "list", "--server", server)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "TRACE" in lines[0]
    assert "SERVICE" in lines[0]
    rows = [line.split("  ") for line in lines if line.startswith(tid(0)[:8])]
    assert [r[0] for r in rows] == [tid(3), tid(2), tid(1)]
    second = [cell.strip() for cell in rows[1] if cell.strip()]
    assert second[1:] == [
        "2023-11-14 22:15:20",
        "pay",
        "handle order",
        "2000.0 ms",
        "3",
        "error",
        "fail 1/1",
        "s0",
        "order 2",
    ]
    first = [cell.strip() for cell in rows[2] if cell.strip()]
    assert first[6:8] == ["ok", "pass 1/1"]  # contains passed; length is no pass/fail
    assert [cell.strip() for cell in rows[0] if cell.strip()][6:8] == ["ok", "-"]
    assert [t["scores"] for t in doc["traces"]][1:] == [
        [
            {
                "policy": "quality",
                "evaluator": "contains",
                "name": "contains",
                "kind": "passed",
                "value": False,
            }
        ],
        [
            {
                "policy": "quality",
                "evaluator": "contains",
                "name": "contains",
                "kind": "passed",
                "value": True,
            },
            {
                "policy": "quality",
                "evaluator": "length",
                "name": "length",
                "kind": "number",
                "value": 13.0,
            },
        ],
    ]


def test_show_against_a_server(cli: Cli, server: str) -> None:
    out = cli("traces", "show", tid(3), "--server", server)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"trace {tid(3)}  service shop  2023-11-14 22:16:20 UTC")
    assert "3 spans  ok" in lines[0]
    assert lines[1:4] == [
        "agent  handle order (order-agent)  2000.0 ms  ok",
        "└─ llm  chat (gpt-4o)  900.0 ms  ok",
        f"   └─ tool  execute_tool refund (refund)  250.0 ms  ok  linked to {tid(53)}/{sid(9)}",
    ]
    assert lines[4:] == ["feedback:", '  thumbs  -1  "slow"', "scores: (none)"]
    failed = cli("traces", "show", tid(2), "--server", server)
    assert "tool  execute_tool refund (refund)  250.0 ms  error: card declined" in failed.stdout
    doc = parse_json_stdout(cli("traces", "show", tid(3), "--server", server, "--format", "json"))
    assert [s["type"] for s in doc["spans"]] == ["agent", "llm", "tool"]
    assert doc["spans"][2]["links"] == [
        {"trace_id": tid(53), "span_id": sid(9), "attributes": {"why": "approval"}}
    ]
    assert doc["spans"][1]["view"] == {
        "type": "llm",
        "convention": "otel-genai/1.27",
        "name": "gpt-4o",
        "model": "gpt-4o",
    }
    assert doc["feedback"][0]["value"] == -1.0
    assert doc["summary"]["span_count"] == 3
    assert doc["scores"] == []


def test_show_prints_the_policy_scores(cli: Cli, server: str) -> None:
    out = cli("traces", "show", tid(1), "--server", server)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    at = lines.index("scores:")
    table = [line.split() for line in lines[at + 1 :]]
    assert table[0] == ["POLICY", "EVALUATOR", "METRIC", "OUTCOME", "VALUE", "WHY"]
    assert table[2:] == [  # under the header and its rule
        ["quality", "contains", "contains", "scored", "pass"],
        ["quality", "length", "length", "scored", "13"],  # len("refund issued")
    ]
    doc = parse_json_stdout(cli("traces", "show", tid(2), "--server", server, "--format", "json"))
    contains, length = doc["scores"]
    assert {
        k: contains[k] for k in ("policy", "evaluator", "metric", "outcome", "kind", "value")
    } == {
        "policy": "quality",
        "evaluator": "contains",
        "metric": "contains",
        "outcome": "scored",
        "kind": "passed",
        "value": False,
    }
    assert contains["explanation"] == "'refund' not found"
    assert contains["run_id"].startswith("watch-")
    assert contains["evaluator_ref"] == "builtin/contains@1.0.0"
    assert (length["evaluator"], length["outcome"], length["value"]) == ("length", "skipped", None)
    assert "scores.all(s, s.passed)" in length["reason"]
    shown = cli("traces", "show", tid(2), "--server", server).stdout.splitlines()
    rows = [line.split() for line in shown[shown.index("scores:") + 3 :]]
    assert rows[0] == [
        "quality",
        "contains",
        "contains",
        "scored",
        "fail",
        "'refund'",
        "not",
        "found",
    ]
    assert rows[1][:5] == ["quality", "length", "-", "skipped", "-"]


def test_sessions(cli: Cli, server: str, store: str) -> None:
    for where in (("--server", server), ("--store", store)):
        doc = parse_json_stdout(cli("traces", "sessions", *where, "--format", "json"))
        assert [(s["session_id"], s["trace_count"], s["error_count"]) for s in doc["sessions"]] == [
            ("s1", 2, 0),
            ("s0", 1, 1),
        ]  # s1: traces 1 and 3 (3 newest); s0: trace 2 failed
        assert doc["sessions"][0]["first_start_unix_nano"] == T0 + 60 * S
    out = cli("traces", "sessions", "--server", server)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["SESSION", "TRACES", "ERRORS"]
    assert [line.split()[:3] for line in lines[2:]] == [["s1", "2", "0"], ["s0", "1", "1"]]
    other = parse_json_stdout(
        cli("traces", "sessions", "--server", server, "--project", "other", "--format", "json")
    )
    assert [s["session_id"] for s in other["sessions"]] == ["s1"]  # trace 7


def test_the_same_on_a_local_store(cli: Cli, store: str) -> None:
    doc = parse_json_stdout(cli("traces", "list", "--store", store, "--format", "json"))
    assert [t["trace_id"] for t in doc["traces"]] == [tid(3), tid(2), tid(1)]
    assert [len(t["scores"]) for t in doc["traces"]] == [0, 1, 2]
    out = cli("traces", "show", tid(2), "--store", store)
    assert out.returncode == 0, out.stderr
    assert "error: card declined" in out.stdout
    shown = parse_json_stdout(cli("traces", "show", tid(1), "--store", store, "--format", "json"))
    assert [(s["evaluator"], s["value"]) for s in shown["scores"]] == [
        ("contains", True),
        ("length", 13.0),
    ]
    other = parse_json_stdout(
        cli("traces", "show", tid(7), "--store", store, "--project", "other", "--format", "json")
    )
    assert other["scores"] == []


def test_bad_input(cli: Cli, server: str, store: str) -> None:
    check_user_error(cli("traces", "list", "--server", server, "--since", "yesterday"), "--since")
    check_user_error(cli("traces", "list", "--server", server, "--attr", "novalue"), "--attr")
    check_user_error(cli("traces", "list", "--server", server, "--limit", "0"), "--limit")
    check_user_error(cli("traces", "show", "xyz", "--server", server), "TRACE_ID")
    check_user_error(cli("traces", "show", tid(99), "--server", server), tid(99))
    check_user_error(cli("traces", "show", tid(7), "--store", store), tid(7))  # another project
    check_user_error(cli("traces", "list", "--server", server, "--project", "a b"), "project_id")
    check_user_error(cli("traces", "list", "--server", server, "--store", store), "--store")
    check_user_error(cli("traces", "sessions", "--server", server, "--limit", "0"), "--limit")
    check_user_error(cli("traces", "sessions", "--store", store, "--since", "soon"), "--since")
    # Outside 1970..2262 the unix nanoseconds overflow int64 (SQLite, the wire); 400 digits
    # of days is even inf.
    expected = "expected a time between 1970-01-01 and 2262-04-11"
    for where in (("--store", store), ("--server", server)):
        for when in ("0001-01-01", "9999-12-31", "99999999999999d", "9" * 400 + "d"):
            check_user_error(cli("traces", "list", *where, "--since", when), "--since", expected)
        out = cli("traces", "sessions", *where, "--until", "9999-12-31")
        check_user_error(out, "--until", expected)
