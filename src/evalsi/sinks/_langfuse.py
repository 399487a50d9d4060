"""Results into Langfuse, through the Langfuse Python SDK's API client (``langfuse``, the
``langfuse`` extra).

Each task (record × trial) is a Langfuse trace whose id is derived from (run, record, trial);
each score is a Langfuse score on it whose id is derived from (run, record, trial, evaluator,
metric), with a fixed timestamp (the run's end): Langfuse updates a score sent again with the
same id and timestamp, and a trace or a dataset item sent again with the same id, so a retried
export changes nothing. Pass/fail scores are BOOLEAN, numbers NUMERIC, labels alone
CATEGORICAL; the explanation is the comment.

Traces go in over the SDK's OTLP endpoint (``/api/public/otel/v1/traces``, the one write path
of Langfuse's current data model), one root span each, with span ids derived too. The SDK's
tracing client is not used: it keeps one process-wide instance per public key (a second key
for the same project, or a second export after ``shutdown``, would reuse the first), installs
a global OpenTelemetry tracer provider, and logs rather than raises a failed upload — a sink
must report a failure and leave the process's telemetry alone.

With ``dataset``, every record is a dataset item (id from dataset and record), and each task's
span carries the ``langfuse.experiment.*`` attributes the SDK's ``run_experiment`` sets, which
make the traces one dataset run (an "experiment") named after the evalsi run; its id is
derived as the SDK derives it (project, dataset, run name), so a retry lands on the same run.

The run's summary is a trace of its own (id from the run alone): the metrics, their intervals
and the gates as its metadata and output; each metric's mean a NUMERIC score and each gate a
BOOLEAN score on it (the interval in the comment), and on the dataset run too when there is one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from evalsi.core import UserError, require_extra
from evalsi.sinks._remote_ids import hex_id, task_trace_id
from evalsi.sinks._sink import (
    Receipt,
    ResultRow,
    RunHeader,
    TraceScore,
    gate_lines,
    metric_key,
    summary_scores,
)

TIMEOUT_S = 10.0
SPANS_PER_REQUEST = 500
SCORE_BODY_BYTES = 900_000  # under POST /api/public/scores' 1 MiB body limit
COMMENT_CHARS = 4000
_HEADERS = {"x-langfuse-ingestion-version": "4"}  # the real-time OTLP path (the SDK sends it)


class _Api:
    """The SDK's API client on an HTTP client of our own: bounded time, no redirects (a
    redirect could point anywhere), errors raised with the sink's name."""

    def __init__(self, host: str, public_key: str, secret_key: str, timeout_s: float) -> None:
        require_extra("the langfuse sink", "langfuse", "langfuse")
        import httpx
        from langfuse.api import LangfuseAPI

        self.target = host
        if not secret_key:
            raise UserError(f"langfuse sink {host}: the secret key is empty")
        self.http = httpx.Client(timeout=timeout_s, follow_redirects=False)
        self.api = LangfuseAPI(
            base_url=host.rstrip("/"),
            username=public_key,
            password=secret_key,
            x_langfuse_sdk_name="evalsi",
            x_langfuse_public_key=public_key,
            headers=dict(_HEADERS),
            httpx_client=self.http,
            timeout=timeout_s,
        )

    def fail(self, e: Exception, doing: str) -> UserError:
        from langfuse.api.core import ApiError

        if isinstance(e, UserError):
            return e
        if isinstance(e, ApiError):
            code = e.status_code
            why = f"HTTP {code}"
            if code in (401, 403):
                why += ": the keys were refused (check publicKey and secretKeyRef)"
            else:
                why += f": {str(e.body)[:300]}"
        else:
            why = f"{type(e).__name__}: {e}"
        return UserError(f"langfuse sink {self.target}: {doing}: {why}")

    def project_id(self) -> str:
        try:
            projects = self.api.projects.get().data
        except Exception as e:  # noqa: BLE001 - the SDK raises its own and httpx's errors
            raise self.fail(e, "checking the keys") from None
        if not projects:
            raise UserError(f"langfuse sink {self.target}: the keys belong to no project")
        return str(projects[0].id)

    def send_spans(self, spans: list[Any]) -> None:
        from langfuse.api import OtelResourceSpan, OtelScope, OtelScopeSpan

        for start in range(0, len(spans), SPANS_PER_REQUEST):
            chunk = spans[start : start + SPANS_PER_REQUEST]
            body = OtelResourceSpan(
                scope_spans=[OtelScopeSpan(scope=OtelScope(name="evalsi"), spans=chunk)]
            )
            try:
                self.api.opentelemetry.export_traces(resource_spans=[body])
            except Exception as e:  # noqa: BLE001
                raise self.fail(e, "sending traces") from None

    def send_scores(self, scores: list[Any]) -> None:
        """In requests under the endpoint's body limit; a score the server rejects (HTTP 207)
        is a failure, not a partial success."""
        batch: list[Any] = []
        size = 0
        for score in scores:
            n = len(score.model_dump_json())
            if batch and size + n > SCORE_BODY_BYTES:
                self._post_scores(batch)
                batch, size = [], 0
            batch.append(score)
            size += n + 1
        if batch:
            self._post_scores(batch)

    def _post_scores(self, batch: list[Any]) -> None:
        try:
            answer = self.api.scores.create(request=batch)
        except Exception as e:  # noqa: BLE001
            raise self.fail(e, "sending scores") from None
        rejected = int(getattr(answer, "rejected", 0) or 0)
        if rejected:
            errors = "; ".join(str(x.message) for x in getattr(answer, "errors", [])[:3])
            raise UserError(
                f"langfuse sink {self.target}: {rejected} of {len(batch)} scores rejected: {errors}"
            )

    def close(self) -> None:
        self.http.close()


def _attrs(values: Mapping[str, Any]) -> list[Any]:
    from langfuse.api import OtelAttribute, OtelAttributeValue

    out = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            v = OtelAttributeValue(bool_value=value)
        elif isinstance(value, int):
            v = OtelAttributeValue(int_value=value)
        elif isinstance(value, str):
            v = OtelAttributeValue(string_value=value)
        else:
            v = OtelAttributeValue(string_value=orjson.dumps(value).decode())
        out.append(OtelAttribute(key=key, value=v))
    return out


def _span(trace_id: str, span_id: str, name: str, start: float, end: float, attrs: Any) -> Any:
    from langfuse.api import OtelSpan

    return OtelSpan(
        trace_id=trace_id,
        span_id=span_id,
        name=name,
        kind=1,  # INTERNAL
        start_time_unix_nano=str(int(start * 1e9)),
        end_time_unix_nano=str(int(end * 1e9)),
        attributes=_attrs(attrs),
    )


def _when(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def score_request(
    score_id: str,
    trace_id: str,
    name: str,
    value: float | None,
    passed: bool | None,
    label: str | None,
    comment: str,
    at: float,
    metadata: Mapping[str, Any],
    observation_id: str | None = None,
    dataset_run_id: str | None = None,
) -> Any:
    """One Langfuse score, or None when the result has nothing to score (skipped, errored)."""
    from langfuse.api import CreateScoreRequest, ScoreDataType

    v: float | str
    data_type: ScoreDataType
    if passed is not None:
        data_type, v = ScoreDataType("BOOLEAN"), 1.0 if passed else 0.0
    elif value is not None:
        data_type, v = ScoreDataType("NUMERIC"), float(value)
    elif label:
        data_type, v = ScoreDataType("CATEGORICAL"), label
    else:
        return None
    categorical = data_type == ScoreDataType("CATEGORICAL")
    meta = {**metadata, **({"label": label} if label and not categorical else {})}
    return CreateScoreRequest(
        id=score_id,
        trace_id=trace_id or None,
        observation_id=observation_id or None,
        dataset_run_id=dataset_run_id,
        name=name,
        value=v,
        data_type=data_type,
        comment=comment[:COMMENT_CHARS] or None,
        metadata=dict(meta),
        timestamp=_when(at),
    )


class LangfuseSink:
    kind = "langfuse"

    def __init__(
        self,
        host: str,
        public_key: str,
        secret_key: str,
        dataset: str = "",
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.target = host
        self.remote = _Api(host, public_key, secret_key, timeout_s)
        self.dataset = dataset
        self.header: RunHeader | None = None
        self.project_id = ""
        self.dataset_id = ""
        self.experiment_id = ""
        self.run_name = ""
        self.spans: list[Any] = []
        self.scores: list[Any] = []
        self.tasks: set[tuple[str, int]] = set()
        self.items: set[str] = set()
        self.rows = 0
        self.sent_scores = 0

    @property
    def _at(self) -> float:
        assert self.header is not None
        return self.header.finished_at or self.header.created_at

    def begin(self, run: RunHeader) -> None:
        self.header = run
        self.project_id = self.remote.project_id()
        self.run_name = f"{run.name} [{run.run_id}]" if run.name else run.run_id
        if not self.dataset:
            return
        from langfuse.api import NotFoundError

        api = self.remote.api
        try:
            try:
                found = api.datasets.get(self.dataset)
            except NotFoundError:
                found = api.datasets.create(
                    name=self.dataset, description="evalsi records", metadata={"source": "evalsi"}
                )
        except Exception as e:  # noqa: BLE001
            raise self.remote.fail(e, f"dataset {self.dataset!r}") from None
        self.dataset_id = str(found.id)
        # Langfuse's stable dataset-run id (its SDK and server derive it alike): a re-export
        # under the same run name lands in the same dataset run.
        payload = orjson.dumps(
            ["langfuse-experiment-v1", self.project_id, self.dataset_id, self.run_name]
        )
        import hashlib

        self.experiment_id = hashlib.sha256(payload).hexdigest()[:16]

    def write(self, rows: Sequence[ResultRow]) -> None:
        assert self.header is not None
        run = self.header
        for row in rows:
            self.rows += 1
            trace_id = task_trace_id(run.run_id, row.record_id, row.trial)
            if (row.record_id, row.trial) not in self.tasks:
                self.tasks.add((row.record_id, row.trial))
                self.spans.append(self._task_span(row, trace_id))
            name = metric_key({"evaluator": row.evaluator, "metric": row.metric})
            score = score_request(
                hex_id("langfuse.score", run.run_id, row.record_id, row.trial, row.evaluator,
                       row.metric),
                trace_id, name, row.value, row.passed, row.label, row.explanation, self._at,
                {"evalsi_run_id": run.run_id, "record_id": row.record_id, "trial": row.trial,
                 "outcome": row.outcome},
            )  # fmt: skip
            if score is not None:
                self.scores.append(score)
        self._flush(SPANS_PER_REQUEST)

    def _task_span(self, row: ResultRow, trace_id: str) -> Any:
        from langfuse import LangfuseOtelSpanAttributes as A

        assert self.header is not None
        run = self.header
        span_id = hex_id("langfuse.span", run.run_id, row.record_id, row.trial, chars=16)
        attrs: dict[str, Any] = {
            A.TRACE_NAME: run.name or "evalsi",
            A.OBSERVATION_INPUT: {"record_id": row.record_id, "trial": row.trial},
            f"{A.TRACE_METADATA}.evalsi_run_id": run.run_id,
            f"{A.TRACE_METADATA}.record_id": row.record_id,
            f"{A.TRACE_METADATA}.trial": str(row.trial),
            f"{A.TRACE_METADATA}.project": run.project,
        }
        if self.dataset:
            item_id = hex_id("langfuse.item", self.dataset, row.record_id)
            if row.record_id not in self.items:
                self.items.add(row.record_id)
                self._upsert_item(item_id, row.record_id)
            attrs |= {
                A.EXPERIMENT_ID: self.experiment_id,
                A.EXPERIMENT_NAME: self.run_name,
                A.EXPERIMENT_DATASET_ID: self.dataset_id,
                A.EXPERIMENT_ITEM_ID: item_id,
                A.EXPERIMENT_ITEM_ROOT_OBSERVATION_ID: span_id,
            }
        end = run.finished_at or run.created_at
        return _span(trace_id, span_id, "evalsi.task", run.created_at, end, attrs)

    def _upsert_item(self, item_id: str, record_id: str) -> None:
        # The record's content stays in the store; the item names it, and Langfuse upserts
        # it by id (an id is project-wide, so it is derived from the dataset too).
        try:
            self.remote.api.dataset_items.create(
                dataset_name=self.dataset,
                id=item_id,
                input={"record_id": record_id},
                metadata={"evalsi_record_id": record_id},
            )
        except Exception as e:  # noqa: BLE001
            raise self.remote.fail(e, f"dataset item for record {record_id!r}") from None

    def _flush(self, at_least: int) -> None:
        if len(self.spans) >= at_least:
            self.remote.send_spans(self.spans)
            self.spans = []
        # A task's span goes before its scores: Langfuse accepts a score for a trace it has
        # not seen yet, but the order keeps a failed export from leaving orphan scores.
        if len(self.scores) >= at_least and not self.spans:
            self.remote.send_scores(self.scores)
            self.sent_scores += len(self.scores)
            self.scores = []

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        assert self.header is not None
        run = self.header
        summary_trace = hex_id("langfuse.trace", run.run_id, "summary")
        metrics, means = summary_scores(summary)
        gates = [{"expr": expr, "verdict": verdict} for expr, verdict in gate_lines(summary)]
        from langfuse import LangfuseOtelSpanAttributes as A

        attrs = {
            A.TRACE_NAME: f"{run.name or 'evalsi'} (summary)",
            A.OBSERVATION_INPUT: run.to_dict(),
            A.OBSERVATION_OUTPUT: {"metrics": metrics, "gates": gates},
            f"{A.TRACE_METADATA}.evalsi_run_id": run.run_id,
            f"{A.TRACE_METADATA}.status": run.status,
            f"{A.TRACE_METADATA}.dataset_version": run.dataset_version,
            f"{A.TRACE_METADATA}.gates": gates,
            **({f"{A.TRACE_METADATA}.dataset_run": self.run_name} if self.dataset else {}),
        }
        end = run.finished_at or run.created_at
        span_id = hex_id("langfuse.span", run.run_id, "summary", chars=16)
        self.spans.append(_span(summary_trace, span_id, "evalsi.run", run.created_at, end, attrs))
        for m in means:
            meta = {"evalsi_run_id": run.run_id, **m.extra}
            self.scores.append(score_request(
                hex_id("langfuse.score", run.run_id, "summary", m.key), summary_trace, m.key,
                m.mean, None, None, m.comment, self._at, meta))  # fmt: skip
            if self.experiment_id:
                self.scores.append(score_request(
                    hex_id("langfuse.score", run.run_id, "dataset-run", m.key), "", m.key,
                    m.mean, None, None, m.comment, self._at, meta,
                    dataset_run_id=self.experiment_id))  # fmt: skip
        for i, g in enumerate(gates):
            self.scores.append(score_request(
                hex_id("langfuse.score", run.run_id, "gate", i), summary_trace, f"gate.{i}",
                None, g["verdict"] == "passed", None, f"{g['verdict']}: {g['expr']}", self._at,
                {"evalsi_run_id": run.run_id, "expr": g["expr"]}))  # fmt: skip
        self._flush(0)
        remote = {
            "project_id": self.project_id,
            "summary_trace_id": summary_trace,
            "traces": str(len(self.tasks)),
            "scores": str(self.sent_scores),
        }
        if self.dataset:
            remote |= {
                "dataset": self.dataset,
                "dataset_id": self.dataset_id,
                "dataset_run": self.run_name,
                "dataset_run_id": self.experiment_id,
                "items": str(len(self.items)),
            }
        return Receipt(self.kind, self.target, self.rows, remote)

    def close(self) -> None:
        self.remote.close()


class LangfuseTraceSink:
    """An online policy's scores on the Langfuse traces they judge: a trace that reached
    Langfuse over OpenTelemetry has the OTel trace id as its Langfuse id, so each score names
    it (and the scored span as the observation); its id is derived from the score's own, so a
    resent batch updates the same scores."""

    kind = "langfuse"

    def __init__(
        self, host: str, public_key: str, secret_key: str, timeout_s: float = TIMEOUT_S
    ) -> None:
        self.target = host
        self.remote = _Api(host, public_key, secret_key, timeout_s)

    def send(self, scores: Sequence[TraceScore]) -> Receipt:
        out = []
        for s in scores:
            request = score_request(
                hex_id("langfuse.trace-score", s.score_id),
                s.trace_id.lower(),
                metric_key({"evaluator": s.evaluator, "metric": s.metric}),
                s.value, s.passed, s.label, s.explanation, s.created_at,
                {"evalsi_policy": s.policy, "evalsi_run_id": s.run_id, "project": s.project,
                 "outcome": s.outcome},
                observation_id=s.span_id.lower() or None,
            )  # fmt: skip
            if request is not None:
                out.append(request)
        self.remote.send_scores(out)
        return Receipt(
            self.kind, self.target, len(scores), {"scores": str(len(out)),
                                                  "skipped": str(len(scores) - len(out))}
        )  # fmt: skip

    def close(self) -> None:
        self.remote.close()


__all__ = ["LangfuseSink", "LangfuseTraceSink", "score_request"]
