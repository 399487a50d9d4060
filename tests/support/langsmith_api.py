"""A recorded-protocol fake of LangSmith's API, on loopback, for the LangSmith sink's tests (the
LangSmith service is not open source: it cannot run here).

Derived from the ``langsmith`` Python SDK 0.15.1 — ``langsmith/client.py`` (``info``,
``create_project``, ``read_project``, ``read_dataset``, ``create_dataset``,
``create_examples`` → ``_upload_single_batch``, ``list_examples``, ``batch_ingest_runs`` →
``_post_batch_ingest_runs``, ``create_feedback``), ``langsmith/schemas.py`` for the response
shapes the SDK parses, and ``langsmith/integrations/otel`` for how LangSmith names a run that
arrived over OpenTelemetry. It answers only what the SDK calls for the sink:

- ``GET /info`` (no key needed): a version and no multipart flags, so the SDK takes its JSON
  endpoints (``/runs/batch``, ``/examples/bulk``, ``/feedback``).
- ``POST /sessions?upsert=true``, ``GET /sessions?name=``: projects.
- ``GET /datasets?name=``, ``POST /datasets``: datasets (a second dataset of one name: 409).
- ``POST /examples/bulk``: all or nothing — one id it already holds refuses the request (409),
  as a unique key would; ``GET /examples?dataset=&id=``: the examples held of those ids.
- ``POST /runs/batch``: LangSmith's ingestion is idempotent per payload (its maintainers: a run
  created once cannot be created again, "payloads already received"): a run it already holds is
  dropped and the answer is 409, the new runs of the same batch are kept. A root run must have
  ``trace_id == id`` and a one-part ``dotted_order``, as the service checks.
- ``POST /feedback``: 409 for an id it already holds; 404 when the run is unknown.

Every request but ``/info`` must carry ``x-api-key`` (401 otherwise). ``ingest_otel_span``
stands in for LangSmith's OTLP endpoint: it files the run the server would make of a span (run
id: the span id right-aligned in 16 zero bytes). What it holds is in ``state``.
"""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

SDK_VERSION = "0.15.1"
TENANT = "00000000-0000-4000-8000-000000000001"
INFO = {
    "version": "0.12.0",
    "instance_flags": {},
    "batch_ingest_config": {
        "use_multipart_endpoint": False,
        "scale_up_qsize_trigger": 1000,
        "scale_up_nthreads_limit": 16,
        "scale_down_nempty_trigger": 4,
        "size_limit": 100,
        "size_limit_bytes": 20_971_520,
    },
}


@dataclass
class LangsmithState:
    api_key: str
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    feedback: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: LangsmithState

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: Any) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        n = int(self.headers.get("Content-Length", "0"))
        body = orjson.loads(self.rfile.read(n)) if n else None
        if url.path == "/info":
            self._answer(200, INFO)
            return
        if self.headers.get("x-api-key") != self.state.api_key:
            self._answer(401, {"detail": "Invalid token"})
            return
        self.state.requests[f"{method} {url.path}"] += 1
        handler = getattr(self, f"_{method.lower()}_{url.path.strip('/').replace('/', '_')}", None)
        if handler is None:
            self._answer(404, {"detail": f"no route {method} {url.path}"})
            return
        with self.state.lock:
            code, answer = handler(query, body)
        self._answer(code, answer)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    # projects (sessions)
    def _post_sessions(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        s = self.state
        found = s.projects.get(body["name"])
        if found is not None:
            return (
                (200, found)
                if query.get("upsert", [""])[0].lower() == "true"
                else (409, {"detail": "exists"})
            )
        found = {"id": str(uuid.uuid4()), "name": body["name"], "start_time": _now(),
                 "tenant_id": TENANT, "extra": body.get("extra"),
                 "reference_dataset_id": None}  # fmt: skip
        s.projects[body["name"]] = found
        return 200, found

    def _get_sessions(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        found = self.state.projects.get(query.get("name", [""])[0])
        return 200, [found] if found else []

    # datasets and examples
    def _get_datasets(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        found = self.state.datasets.get(query.get("name", [""])[0])
        return 200, [found] if found else []

    def _post_datasets(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        if body["name"] in self.state.datasets:
            return 409, {"detail": "Dataset with this name already exists"}
        found = {"id": str(uuid.uuid4()), "name": body["name"],
                 "description": body.get("description"), "created_at": _now(),
                 "modified_at": _now(), "tenant_id": TENANT}  # fmt: skip
        self.state.datasets[body["name"]] = found
        return 200, found

    def _post_examples_bulk(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        s = self.state
        if any(str(e["id"]) in s.examples for e in body):
            s.conflicts["examples"] += 1
            return 409, {"detail": "Example with this ID already exists"}
        out = []
        for e in body:
            held = {"id": str(e["id"]), "dataset_id": e["dataset_id"], "inputs": e.get("inputs"),
                    "outputs": e.get("outputs"), "metadata": e.get("metadata"),
                    "created_at": _now(), "modified_at": _now()}  # fmt: skip
            s.examples[held["id"]] = held
            out.append(held)
        return 200, out

    def _get_examples(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        dataset = query.get("dataset", [""])[0]
        ids = query.get("id") or list(self.state.examples)
        held = [self.state.examples[i] for i in ids if i in self.state.examples]
        held = [e for e in held if not dataset or e["dataset_id"] == dataset]
        offset, limit = int(query.get("offset", ["0"])[0]), int(query.get("limit", ["100"])[0])
        return 200, held[offset : offset + limit]

    # runs and feedback
    def _post_runs_batch(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        s = self.state
        dropped = 0
        for run in body.get("post", []):
            if not run.get("trace_id") or not run.get("dotted_order"):
                return 422, {"detail": "trace_id and dotted_order are required"}
            if not run.get("parent_run_id") and (
                run["trace_id"] != run["id"] or "." in run["dotted_order"]
            ):
                return 400, {"detail": "a root run's trace_id must be its id, and its "
                                       "dotted_order a single part"}  # fmt: skip
            if run["id"] in s.runs:
                dropped += 1
                continue
            s.runs[run["id"]] = run
        if dropped:
            s.conflicts["runs"] += dropped
            return 409, {"error": "Conflict: payloads already received"}
        return 202, {}

    def _post_feedback(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        s = self.state
        if body["id"] in s.feedback:
            s.conflicts["feedback"] += 1
            return 409, {"detail": "Feedback with this id already exists"}
        if body.get("run_id") and body["run_id"] not in s.runs:
            return 404, {"detail": f"run {body['run_id']} not found"}
        s.feedback[body["id"]] = body
        return 200, body


class FakeLangsmith:
    """``with FakeLangsmith("lsv2-key") as ls:`` serves on ``ls.url``."""

    def __init__(self, api_key: str) -> None:
        self.state = LangsmithState(api_key)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def ingest_otel_span(self, project: str, trace_id: str, span_id: str) -> str:
        """File the run LangSmith makes of an OTel span sent to its OTLP endpoint; its id."""
        run_id = str(uuid.UUID(bytes=bytes.fromhex(span_id).rjust(16, b"\0")))
        with self.state.lock:
            self.state.runs[run_id] = {"id": run_id, "otel_trace_id": trace_id,
                                       "session_name": project}  # fmt: skip
        return run_id

    def __enter__(self) -> FakeLangsmith:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = ["SDK_VERSION", "FakeLangsmith", "LangsmithState"]
