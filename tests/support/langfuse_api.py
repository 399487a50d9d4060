"""A recorded-protocol fake of Langfuse's public API, on loopback, for the Langfuse sink's tests
(a Langfuse server needs ClickHouse, Redis, PostgreSQL and S3: it cannot run here).

Derived from the ``langfuse`` Python SDK 5.2.0 — its generated API client
(``langfuse/api/{projects,opentelemetry,scores,datasets,dataset_items}/raw_client.py`` and the
request/response types beside them) — and from what those files quote of Langfuse's public API
reference. It answers only what the SDK's client calls for the sink:

- ``GET  /api/public/projects``: the project of the key pair.
- ``POST /api/public/otel/v1/traces`` (OTLP/HTTP JSON): each span an observation upserted by its
  span id, each trace upserted by its trace id (name and ``langfuse.trace.metadata.*`` from the
  span's attributes); a span with ``langfuse.experiment.*`` attributes links its trace to a
  dataset item in a dataset run (an "experiment"), upserted by (run, item).
- ``POST /api/public/scores``: a list; a score is upserted by (id, timestamp) — the reference
  says a score is updated by sending it again "with the same id and timestamp", so the same id
  with another timestamp is another row here too; an invalid score is rejected in a 207 answer
  with accepted/rejected counts, as the reference describes.
- ``GET /api/public/v2/datasets/{name}`` (404 when missing), ``POST /api/public/v2/datasets``
  (upsert by name), ``POST /api/public/dataset-items`` (upsert by id; an id held by another
  dataset is refused, as the SDK's doc says ids are project-wide).

Every request must carry HTTP basic auth ``public_key:secret_key`` (401 otherwise). What it holds
is plain dicts in ``state`` for the tests to read; ``requests`` counts calls per path.
"""

from __future__ import annotations

import base64
import http.server
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

SDK_VERSION = "5.2.0"
_SCORE_TYPES = ("NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT", "CORRECTION")


@dataclass
class LangfuseState:
    public_key: str
    secret_key: str
    project_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    observations: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def _value(v: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    return None


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: LangfuseState

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: Any) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        want = f"{self.state.public_key}:{self.state.secret_key}".encode()
        got = self.headers.get("Authorization", "")
        if got == "Basic " + base64.b64encode(want).decode():
            return True
        self._answer(401, {"message": "Invalid credentials. Confirm that you've configured "
                                      "the correct host."})  # fmt: skip
        return False

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length", "0"))
        return orjson.loads(self.rfile.read(n)) if n else None

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        body = None
        if not self._authorized():
            return
        self.state.requests[f"GET {path.rsplit('/', 1)[0] if 'datasets/' in path else path}"] += 1
        s = self.state
        if path == "/api/public/projects":
            self._answer(200, {"data": [{"id": s.project_id, "name": "evalsi-test",
                                         "organization": {"id": "org", "name": "org"},
                                         "metadata": {}}]})  # fmt: skip
        elif path.startswith("/api/public/v2/datasets/"):
            from urllib.parse import unquote

            name = unquote(path[len("/api/public/v2/datasets/") :])
            with s.lock:
                body = s.datasets.get(name)
            if body is None:
                self._answer(
                    404, {"message": "Dataset not found", "error": "LangfuseNotFoundError"}
                )
            else:
                self._answer(200, body)
        else:
            self._answer(404, {"message": f"no route {path}"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        body = self._body()
        if not self._authorized():
            return
        self.state.requests[f"POST {path}"] += 1
        route = {
            "/api/public/otel/v1/traces": self._otel,
            "/api/public/scores": self._scores,
            "/api/public/v2/datasets": self._dataset,
            "/api/public/dataset-items": self._item,
        }.get(path)
        if route is None:
            self._answer(404, {"message": f"no route {path}"})
        else:
            route(body)

    def _otel(self, body: Any) -> None:
        s = self.state
        with s.lock:
            for rs in body.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for span in ss.get("spans", []):
                        attrs = {a["key"]: _value(a.get("value", {}))
                                 for a in span.get("attributes", [])}  # fmt: skip
                        trace_id, span_id = span["traceId"], span["spanId"]
                        if len(trace_id) != 32 or len(span_id) != 16:
                            self._answer(400, {"message": "invalid trace or span id"})
                            return
                        s.observations[span_id] = {
                            "traceId": trace_id,
                            "name": span.get("name"),
                            "attributes": attrs,
                            "startTimeUnixNano": span.get("startTimeUnixNano"),
                        }
                        meta = {k.removeprefix("langfuse.trace.metadata."): v
                                for k, v in attrs.items()
                                if k.startswith("langfuse.trace.metadata.")}  # fmt: skip
                        s.traces[trace_id] = {"id": trace_id,
                                              "name": attrs.get("langfuse.trace.name"),
                                              "metadata": meta}  # fmt: skip
                        run = attrs.get("langfuse.experiment.id")
                        item = attrs.get("langfuse.experiment.item.id")
                        if run and item:
                            s.run_items[(run, item)] = {
                                "runName": attrs.get("langfuse.experiment.name"),
                                "datasetId": attrs.get("langfuse.experiment.dataset.id"),
                                "traceId": trace_id,
                                "observationId": attrs.get(
                                    "langfuse.experiment.item.root_observation_id"),
                            }  # fmt: skip
        self._answer(200, {})

    def _scores(self, body: Any) -> None:
        s = self.state
        accepted, errors = 0, []
        with s.lock:
            for score in body:
                problem = _score_problem(score)
                if problem:
                    errors.append({"message": problem})
                    continue
                s.scores[(score["id"], score.get("timestamp", ""))] = score
                accepted += 1
        if errors:
            self._answer(207, {"accepted": accepted, "rejected": len(errors), "errors": errors})
        else:
            self._answer(202, {"message": "Accepted"})

    def _dataset(self, body: Any) -> None:
        s = self.state
        with s.lock:
            found = s.datasets.get(body["name"])
            if found is None:
                found = {"id": uuid.uuid4().hex, "name": body["name"],
                         "description": body.get("description"), "metadata": body.get("metadata"),
                         "projectId": s.project_id, "createdAt": _now(),
                         "updatedAt": _now()}  # fmt: skip
                s.datasets[body["name"]] = found
        self._answer(200, found)

    def _item(self, body: Any) -> None:
        s = self.state
        with s.lock:
            dataset = s.datasets.get(body.get("datasetName", ""))
            if dataset is None:
                self._answer(404, {"message": "Dataset not found"})
                return
            item_id = body.get("id") or uuid.uuid4().hex
            held = s.items.get(item_id)
            if held is not None and held["datasetId"] != dataset["id"]:
                self._answer(400, {"message": "dataset item id is used by another dataset"})
                return
            item = {"id": item_id, "status": "ACTIVE", "input": body.get("input"),
                    "expectedOutput": body.get("expectedOutput"), "metadata": body.get("metadata"),
                    "datasetId": dataset["id"], "datasetName": dataset["name"],
                    "createdAt": _now(), "updatedAt": _now(), "mediaReferences": []}  # fmt: skip
            s.items[item_id] = item
        self._answer(200, item)


def _score_problem(score: dict[str, Any]) -> str:
    kind = score.get("dataType") or "NUMERIC"
    value = score.get("value")
    if not score.get("name"):
        return "name is required"
    if not (score.get("traceId") or score.get("datasetRunId") or score.get("sessionId")):
        return "a score needs a traceId, sessionId or datasetRunId"
    if kind not in _SCORE_TYPES:
        return f"unknown dataType {kind}"
    if kind == "BOOLEAN" and value not in (0, 1):
        return "a BOOLEAN score's value must be 0 or 1"
    if kind == "NUMERIC" and not isinstance(value, int | float):
        return "a NUMERIC score's value must be a number"
    if kind == "CATEGORICAL" and not isinstance(value, str):
        return "a CATEGORICAL score's value must be a string"
    return ""


class FakeLangfuse:
    """``with FakeLangfuse("pk-lf-1", "sk-lf-1") as lf:`` serves on ``lf.url``."""

    def __init__(self, public_key: str, secret_key: str) -> None:
        self.state = LangfuseState(public_key, secret_key)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeLangfuse:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = ["SDK_VERSION", "FakeLangfuse", "LangfuseState"]
