"""Result ingestion against a real server on loopback: one call and chunks, the client key's
idempotence, the client's retries (a layer in front of the app answering 503/429, a TCP proxy
refusing connections), 400s naming the field, and the stored run: summarised as a Score run of
the same verdicts is, readable by `runs list|show`, bundled, and marked external."""

from __future__ import annotations

import asyncio
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

import evalsi
from evalsi.cli import main
from evalsi.client._ingest import INGEST_RETRY
from evalsi.core import NotFoundError, Record, RunError, UserError
from evalsi.evaluators import Skip, evaluator
from evalsi.evidence import rescore_bundle, validate_bundle
from evalsi.server._app import build_app
from evalsi.server._state import Limits, ServerState
from tests.support.asgi_server import AsgiServer
from tests.support.flaky_proxy import FlakyProxy
from tests.support.server_state import server_state

BASES = INGEST_RETRY.delays  # 250, 750, 1750 ms
JITTER = INGEST_RETRY.jitter


# -- the server, with a layer in front of it ------------------------------------------------------
class Gate:
    """In front of the app: notes every IngestService call (its path) and answers the next
    scripted statuses itself (text body, given headers), as a failing proxy or load balancer
    would, before letting calls through."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.script: list[tuple[int, dict[str, str]]] = []
        self.seen: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and ("IngestService" in path or "/ingest" in path):
            self.seen.append(path.rsplit("/", 1)[-1])
            if self.script:
                status, headers = self.script.pop(0)
                while (await receive()).get("more_body"):
                    pass
                raw = [(b"content-type", b"text/plain")]
                raw += [(k.encode(), v.encode()) for k, v in headers.items()]
                await send({"type": "http.response.start", "status": status, "headers": raw})
                await send({"type": "http.response.body", "body": b"try again later"})
                return
        await self.app(scope, receive, send)


@contextmanager
def gated(state: ServerState) -> Iterator[tuple[AsgiServer, Gate]]:
    gate = Gate(build_app(state))
    with AsgiServer(gate) as server:
        yield server, gate
    state.store.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Gate, ServerState]]:
    state = server_state(tmp_path / "server", runs=False)
    with gated(state) as (server, gate):
        yield server.url, gate, state


class Clock:
    """The retry loop's clock: records each wait; ``real`` also waits it."""

    def __init__(self, *, real: bool = False) -> None:
        self.sleeps: list[float] = []
        self.now = 0.0
        self.real = real

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.real:
            await asyncio.sleep(seconds)


def rows(n: int, *, prefix: str = "r") -> list[dict[str, Any]]:
    """Records with a pass/fail verdict (every third fails) and a latency."""
    return [
        {
            "id": f"{prefix}{i}",
            "input": f"question {i}",
            "output": f"answer {i}",
            "metadata": {"topic": "a" if i % 2 else "b"},
            "results": [
                {"evaluator": "judge", "scores": [{"passed": i % 3 != 0, "explanation": "why"}]},
                {"evaluator": "latency", "scores": [{"name": "ms", "value": 100.0 + i}]},
            ],
        }
        for i in range(n)
    ]


def _json(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# -- one call, chunks, the client key ----------------------------------------------------------
def test_one_call_stores_a_score_run_with_its_records(
    served: tuple[str, Gate, ServerState],
) -> None:
    url, gate, state = served
    with evalsi.Client(url) as client:
        result = client.ingest(
            rows(12),
            [{"name": "judge", "ref": "acme/judge", "version": "2"}],
            client_key="one",
            name="nightly",
            source={"tool": "acme-harness", "dataset_name": "qa", "dataset_version": "v3"},
        )
    assert gate.seen == ["Ingest"]
    assert result.status == "done"
    assert result.records == 12
    judge = result.metric("judge")
    assert (judge.metric, judge.n, judge.mean) == ("judge", 12, 8 / 12)
    assert result.metric("latency", "ms").mean == pytest.approx(105.5)
    info = state.store.get_run(result.run_id)
    assert (info.kind, info.status, info.name) == ("score", "done", "nightly")
    assert info.spec["external"] == {
        "client_key": "one",
        "source": {"tool": "acme-harness", "dataset_name": "qa", "dataset_version": "v3"},
    }
    assert [(e["name"], e["ref"], e["external"]) for e in info.evaluators] == [
        ("judge", "acme/judge@2", True),
        ("latency", "external/latency", True),
    ]
    assert info.summary is not None
    assert info.summary["external"] is True
    # The records as a dataset file the run names: its content hash is the run's version.
    data = Path(info.spec["data"])
    assert data.parent == state.config.data_dir / "ingested"
    digest = "sha256:" + hashlib.sha256(data.read_bytes()).hexdigest()
    assert result.dataset_version == digest == info.summary["dataset"]["version"]
    lines = [orjson.loads(line) for line in data.read_bytes().splitlines()]
    assert [line["id"] for line in lines] == [f"r{i}" for i in range(12)]
    assert lines[1] == {
        "id": "r1", "input": "question 1", "output": "answer 1", "metadata": {"topic": "a"},
    }  # fmt: skip
    assert not data.with_suffix(".parts").exists()  # the chunks' parts are gone once joined
    stored = [r for _, _, r in state.store.iter_results(result.run_id)]
    assert len(stored) == 24
    assert stored[0].scores[0].explanation == "why"


def test_chunks_and_the_same_key_again(served: tuple[str, Gate, ServerState]) -> None:
    url, gate, state = served
    data = rows(450)  # 200 + 200 + 50
    with evalsi.Client(url) as client:
        first = client.ingest(data, client_key="big")
        assert gate.seen == ["StartIngest", "AppendIngest", "AppendIngest", "AppendIngest",
                             "FinalizeIngest"]  # fmt: skip
        gate.seen.clear()
        again = client.ingest(data, client_key="big")
        assert gate.seen == ["StartIngest"]  # finalized already: nothing is sent again
        small = client.ingest(data[:5], client_key="big")  # one call, the same key
        other = client.ingest(data[:5], client_key="other")
        runs = client.list_runs(limit=10)
    assert again.run_id == first.run_id == small.run_id != other.run_id
    assert [r.id for r in runs].count(first.run_id) == 1
    assert (first.records, again.records, small.records) == (450, 450, 450)
    assert state.store.count_results(first.run_id) == 900  # 450 records x 2 evaluators
    assert first.metric("judge").n == 450
    assert again.metric("judge") == first.metric("judge")
    assert len(again.results) == 900  # read back from the server, page by page


def test_a_chunk_sent_again_is_stored_once(served: tuple[str, Gate, ServerState]) -> None:
    url, _, state = served
    header = {"clientKey": "retried", "evaluators": [{"name": "judge"}]}

    def chunk(ids: range) -> list[dict[str, Any]]:
        return [
            {
                "record": {"id": f"c{i}", "output": {"text": "x"}},
                "results": [
                    {
                        "evaluator": "judge",
                        "outcome": "OUTCOME_SCORED",
                        "scores": [{"passed": True}],
                    }
                ],
            }
            for i in ids
        ]

    status, started = _json("POST", url + "/v1alpha1/ingest:start", header)
    assert status == 200
    assert started["alreadyFinalized"] is False
    run_id = started["runId"]
    sent = ((0, range(3), "3"), (3, range(3, 5), "5"), (3, range(3, 5), "5"), (0, range(3), "5"))
    for offset, ids, received in sent:  # the second and the fourth: sent again
        body = {"runId": run_id, "offset": offset, "records": chunk(ids)}
        status, answer = _json("POST", url + "/v1alpha1/ingest:append", body)
        assert (status, answer["records"]) == (200, received), answer
    assert state.store.count_results(run_id) == 5
    # Neither the next chunk nor one sent before: refused, nothing stored.
    body = {"runId": run_id, "offset": 7, "records": chunk(range(1))}
    status, answer = _json("POST", url + "/v1alpha1/ingest:append", body)
    assert status == 409
    assert answer["message"].startswith("offset: 7 is not where a chunk starts")
    body = {"runId": run_id, "offset": 0, "records": chunk(range(2))}
    status, answer = _json("POST", url + "/v1alpha1/ingest:append", body)
    assert status == 409
    assert "sent before with 3 records" in answer["message"]
    status, done = _json("POST", url + "/v1alpha1/ingest:finalize", {"runId": run_id})
    assert status == 200
    assert done["alreadyFinalized"] is False
    assert done["run"]["records"] == "5"
    assert done["run"]["metrics"][0]["n"] == "5"
    status, again = _json("POST", url + "/v1alpha1/ingest:finalize", {"runId": run_id})
    assert status == 200
    assert again["alreadyFinalized"] is True
    assert again["run"]["metrics"] == done["run"]["metrics"]
    status, late = _json(
        "POST", url + "/v1alpha1/ingest:append", {"runId": run_id, "records": chunk(range(1))}
    )
    assert status == 409
    assert "is finalized: it takes no more records" in late["message"]
    status, same = _json("POST", url + "/v1alpha1/ingest:start", header)
    assert (status, same["runId"], same["alreadyFinalized"]) == (200, run_id, True)
    status, moved = _json(
        "POST", url + "/v1alpha1/ingest:start", {**header, "evaluators": [{"name": "other"}]}
    )
    assert status == 409
    assert "declared otherwise" in moved["message"]
    status, missing = _json(
        "POST", url + "/v1alpha1/ingest:append",
        {"runId": "ing-" + "0" * 24, "records": chunk(range(1))},
    )  # fmt: skip
    assert status == 404, missing
    status, elsewhere = _json(
        "POST", url + "/v1alpha1/ingest:finalize", {"runId": run_id, "projectId": "other"}
    )
    assert status == 404, elsewhere


def test_chunks_continue_on_a_restarted_server(tmp_path: Path) -> None:
    """The parts and the run outlive the server: a new one on the same store and data dir
    takes the next chunk and finalizes."""
    root = tmp_path / "server"
    header = {"clientKey": "restart", "evaluators": [{"name": "judge"}]}
    records = [
        {
            "record": {"id": f"x{i}", "output": {"text": "x"}},
            "results": [{"evaluator": "judge", "outcome": "OUTCOME_SCORED",
                         "scores": [{"passed": i % 2 == 0}]}],
        }
        for i in range(4)
    ]  # fmt: skip
    with gated(server_state(root, runs=False)) as (server, _):
        _, started = _json("POST", server.url + "/v1alpha1/ingest:start", header)
        body = {"runId": started["runId"], "offset": 0, "records": records[:2]}
        assert _json("POST", server.url + "/v1alpha1/ingest:append", body)[0] == 200
    with gated(server_state(root, runs=False)) as (server, _):
        body = {"runId": started["runId"], "offset": 2, "records": records[2:]}
        status, answer = _json("POST", server.url + "/v1alpha1/ingest:append", body)
        assert (status, answer["records"]) == (200, "4")
        status, done = _json(
            "POST", server.url + "/v1alpha1/ingest:finalize", {"runId": started["runId"]}
        )
    assert status == 200
    assert done["run"]["metrics"][0]["n"] == "4"
    assert done["run"]["metrics"][0]["mean"] == 0.5


# -- retries ------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["connect", "grpc"])
def test_503_is_retried_with_jittered_waits(
    served: tuple[str, Gate, ServerState], protocol: str
) -> None:
    url, gate, _ = served
    gate.script = [(503, {}), (502, {}), (503, {})]
    clock = Clock()
    with evalsi.Client(url, protocol=protocol) as client:
        result = client.ingest(rows(3), client_key=f"flaky-{protocol}", clock=clock)
    assert result.status == "done"
    assert result.records == 3
    assert gate.seen == ["Ingest"] * 4
    assert len(clock.sleeps) == 3
    for waited, base in zip(clock.sleeps, BASES, strict=True):
        assert base * (1 - JITTER) <= waited <= base * (1 + JITTER), (waited, base)


def test_retries_give_up_after_the_last_wait(served: tuple[str, Gate, ServerState]) -> None:
    url, gate, _ = served
    gate.script = [(503, {})] * 10
    clock = Clock()
    with evalsi.Client(url) as client, pytest.raises(RunError) as caught:
        client.ingest(rows(2), client_key="down", clock=clock)
    assert gate.seen == ["Ingest"] * 4  # four attempts, three waits
    assert len(clock.sleeps) == 3
    assert "after 4 attempts" in str(caught.value)


def test_429_waits_as_long_as_retry_after_asks(served: tuple[str, Gate, ServerState]) -> None:
    url, gate, _ = served
    gate.script = [(429, {"Retry-After": "3"}), (429, {})]
    clock = Clock()
    with evalsi.Client(url) as client:
        result = client.ingest(rows(450), client_key="busy", clock=clock)  # chunked
    assert result.records == 450
    assert gate.seen[:3] == ["StartIngest"] * 3
    assert clock.sleeps[0] == 3.0  # the server's wait, longer than 250 ms +- 20 %
    assert BASES[1] * (1 - JITTER) <= clock.sleeps[1] <= BASES[1] * (1 + JITTER)


def test_a_refused_connection_is_retried(tmp_path: Path) -> None:
    """A TCP proxy resetting every connection for a while (a server restarting): the client
    waits for real and gets through."""
    state = server_state(tmp_path, runs=False, allowed_hosts=("127.0.0.1",))  # any port
    clock = Clock(real=True)
    with (
        gated(state) as (server, _),
        FlakyProxy(("127.0.0.1", server.port)) as proxy,
        evalsi.Client(proxy.url) as client,
    ):
        proxy.refuse(0.5)
        result = client.ingest(rows(3), client_key="reset", clock=clock)
    assert result.records == 3
    assert clock.sleeps, "the first attempt should have met a reset connection"
    assert proxy.resets >= 1


def test_a_bad_request_is_not_retried(served: tuple[str, Gate, ServerState]) -> None:
    url, gate, _ = served
    clock = Clock()
    bad = rows(2)
    bad[1]["results"][0]["evaluator"] = "Judge!"
    with evalsi.Client(url) as client, pytest.raises(UserError) as caught:
        client.ingest(bad, client_key="bad", clock=clock)
    assert caught.value.message.startswith("records[1].results[0].evaluator: expected 1-64")
    assert gate.seen == ["Ingest"]
    assert clock.sleeps == []
    with evalsi.Client(url) as client, pytest.raises(NotFoundError):
        client.get_run("ing-" + "0" * 24)


# -- bad input --------------------------------------------------------------------------------
def _scored(**score: Any) -> dict[str, Any]:
    return {"evaluator": "judge", "outcome": "OUTCOME_SCORED", "scores": [score]}


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("no key", {"clientKey": ""}, "client_key: expected 1-128 printable"),
    ("project", {"projectId": "-x"}, "project_id: project_id '-x' is not valid"),
    ("no id", {"records": [{"record": {"output": {"text": "x"}}, "results": []}]},
     "records[0].record.id: empty"),
    ("empty content", {"records": [{"record": {"id": "a", "output": {}}}]},
     "records[0].record.output: a Content must hold one of"),
    ("name", {"evaluators": [{"name": "Judge"}]}, "evaluators[0].name: expected 1-64 lowercase"),
    ("ref", {"evaluators": [{"name": "judge", "ref": "Acme/x"}]}, "evaluators[0].ref: "),
    ("range", {"evaluators": [{"name": "judge", "outputs": [{"name": "m", "type":
     "SCORE_KIND_NUMBER", "range": {"low": 2, "high": "Infinity"}}]}]},
     "evaluators[0].outputs[0].range: expected finite bounds"),
    ("tokens", {"records": [{"record": {"id": "a", "usage": {"inputTokens": -1}},
     "results": [_scored(passed=True)]}]},
     "records[0].record: field 'usage.input_tokens': expected a non-negative integer"),
    ("NaN in a row", {"records": [{"record": {"id": "a", "output": {"row": {"probabilities":
     {"yes": "NaN"}}}}, "results": [_scored(passed=True)]}]}, "records[0].record: field 'output'"),
    ("nothing", {"evaluators": [], "records": [{"record": {"id": "a"}}]}, "evaluators: none"),
    ("outcome", {"records": [{"record": {"id": "a"}, "results": [{"evaluator": "judge"}]}]},
     "records[0].results[0].outcome: required"),
    ("no score", {"records": [{"record": {"id": "a"}, "results": [
     {"evaluator": "judge", "outcome": "OUTCOME_SCORED"}]}]},
     "records[0].results[0].scores: empty"),
    ("score of a skip", {"records": [{"record": {"id": "a"}, "results": [
     {"evaluator": "judge", "outcome": "OUTCOME_SKIPPED", "scores": [{"passed": True}]}]}]},
     "records[0].results[0].scores: only a scored result"),
    ("empty score", {"records": [{"record": {"id": "a"}, "results": [_scored(name="m")]}]},
     "records[0].results[0].scores[0]: a Score must hold exactly one"),
    ("NaN", {"records": [{"record": {"id": "a"}, "results": [_scored(number="NaN")]}]},
     "records[0].results[0].scores[0]: Score.number must be finite"),
    ("huge", {"records": [{"record": {"id": "a"}, "results": [_scored(number=1e300)]}]},
     "records[0].results[0].scores[0]: Score.number 1e+300 is out of range"),
    ("record id", {"records": [{"record": {"id": "a"}, "results": [
     {**_scored(passed=True), "recordId": "b"}]}]}, "records[0].results[0].record_id: leave"),
    ("trial", {"records": [{"record": {"id": "a"}, "results": [
     {**_scored(passed=True), "trial": 5000}]}]},
     "records[0].results[0].trial: 5000 is outside 0..999"),
    ("JSON", {"records": [{"record": {"id": "a"}, "results": [{"evaluator": "judge",
     "outcome": "OUTCOME_SCORED", "scores": [{"passed": "yes"}]}]}]}, ""),
]  # fmt: skip


@pytest.mark.parametrize(("why", "change", "message"), BAD, ids=[b[0] for b in BAD])
def test_malformed_input_is_a_400_naming_the_field(
    served: tuple[str, Gate, ServerState], why: str, change: dict[str, Any], message: str
) -> None:
    url, _, state = served
    body = {
        "clientKey": "k",
        "evaluators": [{"name": "judge"}],
        "records": [{"record": {"id": "a"}, "results": [_scored(passed=True)]}],
        **change,
    }
    status, answer = _json("POST", url + "/v1alpha1/ingest", body)
    assert status == 400, answer
    assert answer["code"] == "invalid_argument"
    assert answer["message"].startswith(message), answer["message"]
    assert state.store.list_runs() == []  # a bad request leaves no run


def test_records_per_request_are_bounded(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False, limits=Limits(max_request_records=3))
    with (
        gated(state) as (server, _),
        evalsi.Client(server.url) as client,
        pytest.raises(UserError) as caught,
    ):
        client.ingest(rows(4), client_key="many")
    assert "records: 4 records is over this server's limit of 3" in caught.value.message


def test_a_body_over_the_cap_is_not_retried(tmp_path: Path) -> None:
    """evalsi's own 413 travels over Connect as RESOURCE_EXHAUSTED with HTTP 429: sent again
    it would stay too large, so it is not retried as a proxy's 429 is."""
    state = server_state(tmp_path, runs=False, max_body_bytes=2048)
    clock = Clock()
    with (
        gated(state) as (server, gate),
        evalsi.Client(server.url) as client,
        pytest.raises(UserError) as caught,
    ):
        client.ingest(rows(40), client_key="large", clock=clock)
    assert "refused the request: message is larger than configured max 2048" in caught.value.message
    assert gate.seen == ["Ingest"]
    assert clock.sleeps == []


# -- the run, read back -------------------------------------------------------------------------
ANSWERS = {f"s{i}": i % 4 != 0 for i in range(60)}
LATENCY = {f"s{i}": 50.0 + (i * 37) % 11 for i in range(60)}


@evaluator(name="test/verdict", version="1")
def verdict(record: Record) -> bool:
    if record.id == "s3":
        raise Skip("not judged")
    if record.id == "s5":
        raise RuntimeError("the grader crashed")
    return ANSWERS[record.id]


@evaluator(name="test/latency", version="1", output="number")
def latency(record: Record) -> float:
    return LATENCY[record.id]


def test_summaries_are_a_score_runs_of_the_same_verdicts(
    served: tuple[str, Gate, ServerState], tmp_path: Path
) -> None:
    records = [{"id": i, "output": "x"} for i in ANSWERS]
    embedded = evalsi.evaluate(records, [verdict, latency], store=str(tmp_path / "e.db"))

    def results(i: str) -> list[dict[str, Any]]:
        if i == "s3":
            judged: dict[str, Any] = {"evaluator": "verdict", "outcome": "skipped", "reason": "-"}
        elif i == "s5":
            judged = {"evaluator": "verdict", "outcome": "error", "reason": "crashed"}
        else:
            judged = {"evaluator": "verdict", "scores": [{"passed": ANSWERS[i]}]}
        return [judged, {"evaluator": "latency", "scores": [{"value": LATENCY[i]}]}]

    url, _, _ = served
    evaluators = [
        "verdict",
        {"name": "latency", "outputs": [{"name": "latency", "type": "number"}]},
    ]
    with evalsi.Client(url) as client:
        ingested = client.ingest(
            [{"id": i, "output": "x", "results": results(i)} for i in ANSWERS], evaluators
        )
    assert len(ingested.metrics) == len(embedded.metrics) == 2
    for got, want in zip(ingested.metrics, embedded.metrics, strict=True):
        assert (got.evaluator, got.metric, got.kind) == (want.evaluator, want.metric, want.kind)
        assert (got.n, got.scored, got.skipped, got.errors) == (
            want.n, want.scored, want.skipped, want.errors,
        )  # fmt: skip
        assert got.mean == pytest.approx(want.mean, rel=1e-12)
        assert got.std == pytest.approx(want.std, rel=1e-12)
        assert got.ci.method == want.ci.method
        assert (got.ci.low, got.ci.high) == pytest.approx((want.ci.low, want.ci.high), rel=1e-12)
    # The pass rate by hand: 58 judged (s3 skipped, s5 an error), 15 of them failed (i % 4 == 0,
    # s0 ... s56), so 43 passed; and its interval as statsmodels computes Wilson's (both counts
    # over ten: evalsi's interval is plain Wilson there, no Clopper-Pearson edge).
    rate = ingested.metric("verdict")
    assert (rate.n, rate.scored, rate.skipped, rate.errors) == (58, 58, 1, 1)
    assert rate.mean == 43 / 58
    low, high = proportion_confint(43, 58, alpha=0.05, method="wilson")
    assert (rate.ci.low, rate.ci.high) == pytest.approx((low, high), abs=1e-9)
    assert rate.ci.method == "wilson"


def test_trials_give_pass_at_k_and_clustered_intervals(
    served: tuple[str, Gate, ServerState], tmp_path: Path
) -> None:
    data = [
        {
            "id": f"t{i}",
            "results": [
                {"evaluator": "judge", "trial": t, "scores": [{"passed": (i + t) % 3 != 0}]}
                for t in range(3)
            ],
        }
        for i in range(9)
    ]
    url, _, _ = served
    with evalsi.Client(url) as client:
        result = client.ingest(data, client_key="trials")
        written = client.export_bundle(result.run_id, tmp_path / "bundle")
    # Sealed with its trials, validated, and rescored: ingested verdicts are carried as they
    # came (no code here derives them), never reported as differing.
    assert written.tasks == 27
    assert validate_bundle(written.path).exit_code == 0
    rescored = rescore_bundle(written.path)
    assert (rescored.outcome, rescored.compared) == ("MATCH", 0)
    assert "computed outside evalsi" in rescored.carried["judge"]
    assert "Verdicts computed outside evalsi" in (written.path / "report.md").read_text()
    judge = result.metric("judge")
    assert judge.n == 27
    assert judge.clusters == 9
    assert judge.ci.method == "cluster-wilson"
    assert judge.pass_at_k["1"] == pytest.approx(18 / 27)
    assert judge.pass_at_k["3"] == 1.0  # every record passes at least once in three trials


def test_the_run_is_listed_shown_bundled_and_marked_external(
    served: tuple[str, Gate, ServerState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, state = served
    data = rows(6)
    data[2]["results"] = data[2]["results"][:1]  # no latency for r2
    with evalsi.Client(url) as client:
        result = client.ingest(data, client_key="shown", name="from-acme")
        written = client.export_bundle(result.run_id, tmp_path / "bundle")
    assert main(["runs", "list", "--server", url, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["run_id"], r["kind"], r["status"], r["name"]) for r in listed] == [
        (result.run_id, "score", "done", "from-acme")
    ]
    assert main(["runs", "show", result.run_id, "--server", url]) == 0
    shown = capsys.readouterr()
    assert f"run {result.run_id} · score · done · 6 records" in shown.out
    assert "judge" in shown.out
    assert "latency" in shown.out
    assert "1 (record, evaluator) pair(s) came without a result" in shown.out
    # GetRun over REST: the spec, the details and each evaluator say external.
    status, got = _json("GET", f"{url}/v1alpha1/runs/{result.run_id}")
    assert status == 200
    run = got["run"]
    assert run["details"]["external"] is True
    assert run["spec"]["external"]["client_key"] == "shown"
    assert [e["external"] for e in run["details"]["evaluators"]] == [True, True]
    assert run["warnings"][0]["kind"] == "missing_results"
    assert run["warnings"][0]["examples"] == ["r2 (latency)"]
    # The evidence bundle reads the records from the run's file; its metadata says external.
    metadata = json.loads((written.path / "metadata.json").read_text())
    assert metadata["external"] is True
    assert metadata["counts"]["records"] == 6
    lines = (written.path / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["record"]["id"] for line in lines] == [f"r{i}" for i in range(6)]
    assert state.store.count_results(result.run_id) == 12  # the missing latency: skipped
    assert result.metric("latency", "ms").skipped == 1
    # Compared, paired by record, with another ingest of the same records; reported.
    better = rows(6)
    for row in better:
        row["results"][0]["scores"][0]["passed"] = True
    with evalsi.Client(url) as client:
        candidate = client.ingest(better, client_key="better")
        compared = client.compare_runs(result.run_id, candidate.run_id)
    judge = next(m for m in compared.metrics if m.evaluator == "judge")
    assert (judge.n_paired, judge.delta) == (6, pytest.approx(2 / 6))
    report = tmp_path / "report.md"
    assert main(["report", result.run_id, "--store", state.config.store, "-o", str(report)]) == 0
    assert "judge" in report.read_text()
    assert "Verdicts computed outside evalsi" in report.read_text()
    html = tmp_path / "report.html"
    assert main(["report", result.run_id, "--store", state.config.store, "-o", str(html)]) == 0
    assert "Verdicts computed outside evalsi" in html.read_text()
