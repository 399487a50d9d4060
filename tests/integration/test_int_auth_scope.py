"""Project scoping on a real server with identity on, over REST and OTLP/HTTP: each online
policy grades only its own project's traces (spans sent with each project's ingest key), a
trace id sent to two projects stays two traces, ingested runs record who started them, and
nothing of project beta is visible to alpha's keys: every list leaves it out, every get,
update and delete of it is 404 (NOT_FOUND) with the body an unknown id gets, and it is
unchanged afterwards."""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from joserfc.jwk import RSAKey
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from evalsi.server import load_config
from evalsi.server._state import ServerState, TracesConfig
from tests.support.asgi_server import AsgiServer
from tests.support.auth_rig import SECRET, config_doc, http, token, write_config
from tests.support.jwks_server import JwksServer
from tests.support.policy_traces import wait_for
from tests.support.server_state import server_state, serving

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: NAME}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  cascade:
    - {ref: contains, params: {values: [thanks]}}
"""
SHARED = "5ca1ab1e" * 4  # one trace id, sent to both projects with different content


class _Fixed(IdGenerator):
    """The trace id given and span ids counted from 1: two turns made with it are spans of
    the same (trace id, span id) pairs."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = int(trace_id, 16)
        self.spans = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self.spans)

    def generate_trace_id(self) -> int:
        return self.trace_id


def turn(output: str, trace_id: str | None = None) -> tuple[str, list[Any]]:
    """An agent turn as the OpenTelemetry SDK records it: its trace id and finished spans."""
    memory = InMemorySpanExporter()
    ids = _Fixed(trace_id) if trace_id else RandomIdGenerator()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-agent"}), id_generator=ids
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        root.set_attribute("input.value", "my order is late")
        root.set_attribute("output.value", output)
        with tracer.start_as_current_span("chat") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x"), list(memory.get_finished_spans())


def send(url: str, key: str, spans: list[Any]) -> None:
    """Spans over OTLP/HTTP with an ingest key: the key's project is where they go."""
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"authorization": f"Bearer {key}"}
    )
    try:
        assert exporter.export(spans).name == "SUCCESS"
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]


@dataclass
class World:
    server: AsgiServer
    state: ServerState
    idp: tuple[JwksServer, RSAKey]
    traces: dict[str, str] = field(default_factory=dict)  # what -> trace id
    beta: dict[str, str] = field(default_factory=dict)  # beta's resources: kind -> id

    @property
    def url(self) -> str:
        return self.server.url

    def call(self, key: str, path: str, body: Any = None, method: str = "") -> Any:
        """A call that must succeed; its JSON body."""
        status, answer, text = http(
            self.url + path,
            SECRET[key],
            body=body,
            method=method or ("GET" if body is None else "POST"),
        )
        assert status == 200, (path, text)
        return answer

    def policy_results(self, project: str, name: str) -> dict[str, bool]:
        """The trace ids a policy graded, each with its ``contains`` verdict."""
        policy = self.call("owner", f"/v1alpha1/policies/{name}?projectId={project}")["policy"]
        path = f"/v1alpha1/runs/{policy['runId']}/results?projectId={project}"
        results = self.call("owner", path)["results"]
        return {r["recordId"]: r["scores"][0]["passed"] for r in results}


def _evaluate_body(project: str) -> dict[str, Any]:
    records = [
        {
            "id": "q1",
            "input": {"text": "2+2?"},
            "output": {"text": "4"},
            "reference": {"text": "4"},
        },
        {
            "id": "q2",
            "input": {"text": "1+1?"},
            "output": {"text": "3"},
            "reference": {"text": "2"},
        },
    ]
    return {"records": records, "evaluators": [{"ref": "exact-match"}], "projectId": project}


def ingest_body(project: str, key: str) -> dict[str, Any]:
    result = {"evaluator": "judge", "outcome": "OUTCOME_SCORED",
              "scores": [{"name": "judge", "passed": True}]}  # fmt: skip
    return {
        "clientKey": key,
        "projectId": project,
        "evaluators": [{"name": "judge"}],
        "records": [{"record": {"id": "r1", "output": {"text": "x"}}, "results": [result]}],
    }


def _review(world: World, run_id: str) -> None:
    """A review of one of the run's results, exported and imported by beta's editor."""
    status, _, text = http(
        world.url + f"/v1alpha1/runs/{run_id}/review?projectId=beta", SECRET["editor-b"]
    )
    assert status == 200, text
    data = b"".join(base64.b64decode(json.loads(line)["data"]) for line in text.splitlines())
    header, first, *_ = [json.loads(line) for line in data.splitlines()]
    first["review"] = {"approval": "approved", "verdict": None, "rationale": "ok",
                       "reviewer": "ann"}  # fmt: skip
    filled = b"".join(json.dumps(v).encode() + b"\n" for v in (header, first))
    body = {"projectId": "beta", "file": base64.b64encode(filled).decode()}
    answer = world.call("editor-b", "/v1alpha1/reviews:import", body)
    assert len(answer["accepted"]) == 1, answer


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("scope")
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as jwks:
        config = load_config(write_config(tmp, config_doc(jwks.url, jwks.jwks_url)))
        state = server_state(tmp, auth=config.auth, traces=TracesConfig(grace_s=0.05))
        with serving(state) as server:
            w = World(server, state, (jwks, key))
            for project, editor in (("alpha", "editor-a"), ("beta", "editor-b")):
                body = {"yaml": POLICY.replace("NAME", f"watch-{project[0]}"), "projectId": project}
                w.call(editor, "/v1alpha1/policies", body)
            w.traces["a"], spans = turn("thanks from alpha")
            send(w.url, SECRET["ingest-a"], spans)
            w.traces["b"], spans = turn("thanks from beta")
            send(w.url, SECRET["ingest-b"], spans)
            send(w.url, SECRET["ingest-a"], turn("thanks, alpha's shared turn", SHARED)[1])
            send(w.url, SECRET["ingest-b"], turn("no, beta's shared turn", SHARED)[1])
            wait_for(
                "each policy to grade its project's two traces",
                lambda: all(
                    w.call("owner", f"/v1alpha1/policies/watch-{p[0]}/stats?projectId={p}")[
                        "stats"
                    ]["evaluated"]
                    == "2"
                    for p in ("alpha", "beta")
                ),
            )
            _beta_resources(w)
            yield w


def _beta_resources(w: World) -> None:
    """One of every kind of resource in project beta, made over REST by beta's keys."""
    b = w.beta
    b["run"] = w.call("editor-b", "/v1alpha1/evaluate", _evaluate_body("beta"))["runId"]
    b["ingest"] = w.call("editor-b", "/v1alpha1/ingest", ingest_body("beta", "ck-b"))["run"]["id"]
    started = w.call("editor-b", "/v1alpha1/ingest:start",
                     {"clientKey": "ck-open", "projectId": "beta",
                      "evaluators": [{"name": "judge"}]})  # fmt: skip
    b["open-ingest"] = started["runId"]
    b["policy"] = "watch-b"
    b["trace"] = w.traces["b"]
    made = w.call("admin-b", "/v1alpha1/projects/beta/apiKeys", {"name": "ci-b", "role": "viewer"})
    b["key"] = made["apiKey"]["id"]
    bound = w.call("admin-b", "/v1alpha1/projects/beta/roleBindings",
                   {"role": "viewer", "subject": "user:corp/bob"})  # fmt: skip
    b["binding"] = bound["id"]
    feedback = {"traceId": b["trace"], "name": "thumbs", "value": 1}
    w.call("owner", "/v1alpha1/feedback", {"projectId": "beta", "feedback": feedback})
    _review(w, b["ingest"])


# -- online policies and traces -------------------------------------------------------------------
def test_each_policy_grades_only_its_projects_traces(world: World) -> None:
    alpha = world.policy_results("alpha", "watch-a")
    beta = world.policy_results("beta", "watch-b")
    assert alpha == {world.traces["a"]: True, SHARED: True}  # alpha's shared turn: "thanks"
    assert beta == {world.traces["b"]: True, SHARED: False}  # beta's: "no"
    for project, name in (("alpha", "watch-a"), ("beta", "watch-b")):
        stats = world.call("owner", f"/v1alpha1/policies/{name}/stats?projectId={project}")
        assert (stats["stats"]["selected"], stats["stats"]["evaluated"]) == ("2", "2"), stats


def test_a_trace_id_sent_to_two_projects_stays_two_traces(world: World) -> None:
    seen = {}
    for project in ("alpha", "beta"):
        trace = world.call("owner", f"/v1alpha1/traces/{SHARED}?projectId={project}")["trace"]
        outputs = [s["attributes"]["output.value"] for s in trace["spans"] if s["name"] == "agent"]
        scores = [
            (s["policy"], s["result"]["scores"][0]["passed"]) for s in trace["summary"]["scores"]
        ]
        seen[project] = (len(trace["spans"]), outputs, scores)
    assert seen == {
        "alpha": (2, ["thanks, alpha's shared turn"], [("watch-a", True)]),
        "beta": (2, ["no, beta's shared turn"], [("watch-b", False)]),
    }
    spans = world.call("owner", f"/v1alpha1/spans?projectId=alpha&traceId={SHARED}")["spans"]
    assert len(spans) == 2  # alpha's two, not four
    listed = world.call("owner", "/v1alpha1/traces?projectId=beta")["traces"]
    assert sorted(t["traceId"] for t in listed) == sorted([world.traces["b"], SHARED])


# -- who started a run ----------------------------------------------------------------------------
def test_ingested_runs_record_who_started_them_and_never_the_credential(world: World) -> None:
    once = world.call("editor-a", "/v1alpha1/ingest", ingest_body("alpha", "who-1"))["run"]
    assert once["createdBy"] == "apikey/editor-a"
    jwks, key = world.idp
    alice = token(key, jwks.url, sub="alice")
    status, started, text = http(
        world.url + "/v1alpha1/ingest:start",
        alice,
        body={"clientKey": "who-2", "projectId": "alpha", "evaluators": [{"name": "judge"}]},
        method="POST",
    )
    assert status == 200, text
    assert started["run"]["createdBy"] == "corp/alice"
    store = world.state.store
    assert store.get_run(once["id"]).created_by == "apikey/editor-a"
    assert store.get_run(started["runId"]).created_by == "corp/alice"
    # the same key again, by someone else: the run stays the first caller's
    again = world.call("owner", "/v1alpha1/ingest", ingest_body("alpha", "who-1"))
    assert (again["alreadyFinalized"], again["run"]["createdBy"]) == (True, "apikey/editor-a")
    assert store.get_run(world.beta["ingest"]).created_by == "apikey/editor-b"
    text = json.dumps([once, started, again])
    assert SECRET["editor-a"] not in text
    assert alice not in text


# -- nothing of beta is visible to alpha ----------------------------------------------------------
# (key, method, path, body): every call a key of alpha could make on beta's resources. Lists
# answer 200 without them; the rest 404 — as an id that exists nowhere does. {run}, {policy},
# ... stand for beta's resources; each call is made again with an unknown id of the same shape.
GONE: list[tuple[str, str, str, Any]] = [
    # runs, their results, tasks, categories, bundle, watch, reviews
    ("viewer-a", "GET", "/v1alpha1/runs/{run}?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}?projectId=beta", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}/results?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}/tasks?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}/categories?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}:bundle?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{run}:watch?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{ingest}/review?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{ingest}/reviews?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/runs/{ingest}/reviews?projectId=beta", None),
    ("viewer-a", "POST", "/v1alpha1/runs:compare",
     {"baseline": "{run}", "candidate": "{run}", "projectId": "alpha"}),
    ("editor-a", "POST", "/v1alpha1/runs/{ingest}:cancel", {"projectId": "alpha"}),
    ("editor-a", "POST", "/v1alpha1/runs/{ingest}:cancel", {"projectId": "beta"}),
    ("editor-a", "POST", "/v1alpha1/runs/{run}:resume", {"projectId": "alpha"}),
    ("editor-a", "POST", "/v1alpha1/runs:compare",
     {"baseline": "{run}", "candidate": "{run}", "projectId": "beta"}),
    # ingests
    ("editor-a", "POST", "/v1alpha1/ingest:append",
     {"runId": "{open-ingest}", "projectId": "alpha", "offset": 0,
      "records": ingest_body("alpha", "x")["records"]}),
    ("editor-a", "POST", "/v1alpha1/ingest:finalize",
     {"runId": "{open-ingest}", "projectId": "alpha"}),
    ("editor-a", "POST", "/v1alpha1/ingest:finalize",
     {"runId": "{open-ingest}", "projectId": "beta"}),
    # reviews
    ("editor-a", "POST", "/v1alpha1/reviews:import",
     {"projectId": "alpha", "file": "{review-file}"}),
    # policies
    ("viewer-a", "GET", "/v1alpha1/policies/{policy}?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/policies/{policy}?projectId=beta", None),
    ("viewer-a", "GET", "/v1alpha1/policies/{policy}/stats?projectId=alpha", None),
    ("editor-a", "DELETE", "/v1alpha1/policies/{policy}?projectId=alpha", None),
    ("editor-a", "DELETE", "/v1alpha1/policies/{policy}?projectId=beta", None),
    ("editor-a", "POST", "/v1alpha1/policies",
     {"yaml": POLICY.replace("NAME", "{policy}"), "projectId": "beta"}),
    # traces, spans, sessions, feedback
    ("viewer-a", "GET", "/v1alpha1/traces/{trace}?projectId=alpha", None),
    ("viewer-a", "GET", "/v1alpha1/traces/{trace}?projectId=beta", None),
    ("viewer-a", "GET", "/v1alpha1/traces/{trace}", None),
    ("viewer-a", "GET", "/v1alpha1/spans?projectId=beta&traceId={trace}", None),
    ("viewer-a", "GET", "/v1alpha1/sessions?projectId=beta", None),
    ("admin-a", "POST", "/v1alpha1/feedback",
     {"projectId": "beta", "feedback": {"traceId": "{trace}", "name": "x", "value": 1}}),
    # API keys, role bindings, audit
    ("admin-a", "POST", "/v1alpha1/projects/alpha/apiKeys/{key}:revoke", {}),
    ("admin-a", "POST", "/v1alpha1/projects/beta/apiKeys/{key}:revoke", {}),
    ("admin-a", "GET", "/v1alpha1/projects/beta/apiKeys", None),
    ("admin-a", "DELETE", "/v1alpha1/projects/alpha/roleBindings/{binding}", None),
    ("admin-a", "DELETE", "/v1alpha1/projects/beta/roleBindings/{binding}", None),
    ("admin-a", "GET", "/v1alpha1/projects/beta/roleBindings", None),
    ("admin-a", "GET", "/v1alpha1/auditEvents?projectId=beta", None),
    ("admin-a", "POST", "/v1alpha1/projects/beta/apiKeys", {"name": "mine", "role": "viewer"}),
    ("admin-a", "POST", "/v1alpha1/projects/beta/roleBindings",
     {"role": "viewer", "subject": "user:corp/mallory"}),
    # datasets belong to the default project, where alpha's keys hold no role
    ("editor-a", "GET", "/v1alpha1/datasets", None),
]  # fmt: skip
LISTS: list[tuple[str, str]] = [
    ("viewer-a", "/v1alpha1/runs"),
    ("viewer-a", "/v1alpha1/runs?projectId=alpha"),
    ("viewer-a", "/v1alpha1/policies"),
    ("viewer-a", "/v1alpha1/policies?projectId=alpha"),
    ("viewer-a", "/v1alpha1/traces?projectId=alpha"),
    ("viewer-a", "/v1alpha1/spans?projectId=alpha"),
    ("viewer-a", "/v1alpha1/sessions?projectId=alpha"),
    ("viewer-a", "/v1alpha1/auth/projects"),
    ("viewer-a", "/v1alpha1/auth/whoami"),
    ("admin-a", "/v1alpha1/auditEvents"),
    ("admin-a", "/v1alpha1/auditEvents?projectId=alpha"),
    ("admin-a", "/v1alpha1/projects/alpha/apiKeys"),
    ("admin-a", "/v1alpha1/projects/alpha/roleBindings"),
]
UNKNOWN = {
    "run": "20990101-000000-deadbeefdead",
    "ingest": "ing-" + "0" * 24,
    "open-ingest": "ing-" + "1" * 24,
    "policy": "watch-z",
    "trace": "0" * 31 + "1",
    "key": "key_" + "0" * 16,
    "binding": "rb_" + "0" * 16,
}


def _fill(value: Any, ids: dict[str, str]) -> Any:
    text = json.dumps(value) if value is not None else None
    if text is None:
        return None
    for name, real in ids.items():
        text = text.replace("{" + name + "}", real)
    return json.loads(text)


def _path(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{([a-z-]+)\}", lambda m: ids[m.group(1)], path)


def test_nothing_of_another_project_is_visible(world: World) -> None:
    beta = {**world.beta, "review-file": _review_file(world, world.beta["ingest"])}
    unknown = {
        **UNKNOWN,
        "review-file": _review_file(world, world.beta["ingest"], UNKNOWN["ingest"]),
    }
    before = _beta_state(world)
    for key, path in LISTS:  # first: the calls below are in alpha's audit log, as they should
        text = http(world.url + path, SECRET[key])[2]
        shown = [v for k, v in world.beta.items() if v in text]
        assert not shown, (key, path, shown)
        assert '"beta"' not in text, (key, path)
    for key, method, path, body in GONE:
        answers = []
        for ids in (beta, unknown):
            status, _, text = http(
                world.url + _path(path, ids), SECRET[key], body=_fill(body, ids), method=method
            )
            answers.append((status, _anonymous(text, ids)))
        assert answers[0][0] == 404, (key, method, path, answers[0])
        assert answers[0] == answers[1], (key, method, path)  # says nothing of what exists
    assert _beta_state(world) == before  # nothing of beta changed


def _anonymous(text: str, ids: dict[str, str]) -> str:
    """An answer with the ids the request named put back as placeholders."""
    for name, real in ids.items():
        text = text.replace(real, "{" + name + "}")
    return text


def _review_file(world: World, run_id: str, named: str | None = None) -> str:
    """A filled review file of beta's run (exported by beta's editor), naming ``named`` as
    its run when given, base64 as ImportReview takes it."""
    status, _, text = http(
        world.url + f"/v1alpha1/runs/{run_id}/review?projectId=beta", SECRET["editor-b"]
    )
    assert status == 200, text
    data = b"".join(base64.b64decode(json.loads(line)["data"]) for line in text.splitlines())
    if named is not None:
        data = data.replace(run_id.encode(), named.encode())
    return base64.b64encode(data).decode()


def _beta_state(world: World) -> Any:
    """What alpha's calls must not change: beta's runs, policy, key, binding and reviews."""
    b = world.beta
    runs = {k: world.call("owner", f"/v1alpha1/runs/{b[k]}?projectId=beta")["run"]["status"]
            for k in ("run", "ingest", "open-ingest")}  # fmt: skip
    keys = world.call("owner", "/v1alpha1/projects/beta/apiKeys")["apiKeys"]
    bindings = world.call("owner", "/v1alpha1/projects/beta/roleBindings")["roleBindings"]
    reviews = world.call("owner", f"/v1alpha1/runs/{b['ingest']}/reviews?projectId=beta")
    return (
        runs,
        world.call("owner", "/v1alpha1/policies/watch-b?projectId=beta")["policy"]["specHash"],
        [(k["id"], k.get("revokedAt")) for k in keys],
        sorted(x["id"] for x in bindings),
        len(reviews["reviews"]),
    )
