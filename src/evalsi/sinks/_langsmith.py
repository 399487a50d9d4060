"""Results into LangSmith, through the LangSmith SDK's ``Client`` (``langsmith``, the
``langsmith`` extra).

Each task (record × trial) is a root run in ``project`` whose id is a UUID derived from (run,
record, trial); each score is feedback on it whose id is derived from (run, record, trial,
evaluator, metric). LangSmith refuses an id it already holds (HTTP 409): the SDK's batch
ingestion skips such a run itself, and this sink counts a refused feedback or example as one
sent before — so a retried export adds nothing and fails nothing. Pass/fail is a score of 1 or
0, a number a score, a label alone a categorical value; the explanation is the comment.

Runs go through ``batch_ingest_runs`` (one request per batch, no background thread: the SDK's
auto-batching would log a failed upload rather than raise it); failures the SDK reports to its
``tracing_error_callback`` are raised at the end of each batch. With ``dataset``, every record
is an example (id from dataset and record) and each task's run references it.

The run's summary is a run of its own (id from the run alone): the metrics with their
intervals and the gates as its outputs, each metric's mean and each gate as feedback on it.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalsi.core import UserError, require_extra
from evalsi.sinks._remote_ids import task_run_id, uuid_id
from evalsi.sinks._sink import (
    Receipt,
    ResultRow,
    RunHeader,
    TraceScore,
    gate_lines,
    metric_key,
    summary_scores,
)

LANGSMITH_ENDPOINT = "https://api.smith.langchain.com"  # the sink's endpoint when none is given
TIMEOUT_S = 10.0
DEFAULT_PROJECT = "evalsi"
FEEDBACK_THREADS = 8  # feedback is one request each; a few in flight hide the round trips
COMMENT_CHARS = 4000


class _HeldAlready(logging.Filter):
    """Drops the SDK's error log of a feedback LangSmith already holds (409): for this sink that
    is a retry finding its earlier work, not an error, and a re-export would print one
    traceback per score."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "LangSmithConflictError"


_QUIET = _HeldAlready()


class _Client:
    """The SDK's client, synchronous, with bounded time and errors raised with the sink's name."""

    def __init__(self, endpoint: str, api_key: str, timeout_s: float) -> None:
        require_extra("the langsmith sink", "langsmith", "langsmith")
        from langsmith import Client
        from urllib3.util.retry import Retry

        self.target = endpoint or LANGSMITH_ENDPOINT
        if not api_key:
            raise UserError(f"langsmith sink {self.target}: the API key is empty")
        self.errors: list[Exception] = []
        logging.getLogger("langsmith.client").addFilter(_QUIET)  # once: filters are a set
        ms = int(timeout_s * 1000)
        self.client = Client(
            api_url=self.target,
            api_key=api_key,
            auto_batch_tracing=False,
            timeout_ms=(ms, ms),
            # Two quick retries of a lost connection, not the SDK's minutes of them.
            retry_config=Retry(total=2, backoff_factor=0.2, allowed_methods=None),
            tracing_error_callback=self.errors.append,
            omit_traced_runtime_info=True,
        )

    def fail(self, e: Exception, doing: str) -> UserError:
        from langsmith.utils import LangSmithAuthError

        if isinstance(e, UserError):
            return e
        why = f"{type(e).__name__}: {str(e)[:400]}"
        if isinstance(e, LangSmithAuthError):
            why = "the API key was refused (check apiKeyRef): " + why
        return UserError(f"langsmith sink {self.target}: {doing}: {why}")

    def call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the SDK raises its own and requests' errors
            raise self.fail(e, doing) from None

    def project_id(self, name: str, *, create: bool) -> uuid.UUID:
        if create:
            project = self.call(
                f"project {name!r}", self.client.create_project, name, upsert=True,
                metadata={"source": "evalsi"},
            )  # fmt: skip
        else:
            project = self.call(f"project {name!r}", self.client.read_project, project_name=name)
        return uuid.UUID(str(project.id))

    def ingest(self, runs: list[dict[str, Any]]) -> None:
        self.call("sending runs", self.client.batch_ingest_runs, create=runs)
        self.raise_reported("sending runs")

    def raise_reported(self, doing: str) -> None:
        """What the SDK handed its error callback instead of raising."""
        if self.errors:
            first, self.errors[:] = self.errors[0], []
            raise self.fail(first, doing)

    def feedback(self, items: list[dict[str, Any]]) -> tuple[int, int]:
        """Each item as feedback, a few at once; (created, held already)."""
        from langsmith.utils import LangSmithConflictError

        def one(item: dict[str, Any]) -> bool:
            try:
                self.client.create_feedback(**item, stop_after_attempt=2)
            except LangSmithConflictError:
                return False  # its id is there: sent by an earlier attempt
            return True

        try:
            with ThreadPoolExecutor(FEEDBACK_THREADS) as pool:
                made = list(pool.map(one, items))
        except Exception as e:  # noqa: BLE001
            raise self.fail(e, "sending feedback") from None
        return sum(made), len(made) - sum(made)

    def close(self) -> None:
        self.client.close()


def _stamp(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def feedback_item(
    feedback_id: uuid.UUID,
    key: str,
    value: float | None,
    passed: bool | None,
    label: str | None,
    comment: str,
    extra: Mapping[str, Any],
    **where: Any,
) -> dict[str, Any] | None:
    """``create_feedback``'s arguments for one score, or None when it has nothing to score."""
    if passed is not None:
        score: Any = 1 if passed else 0
    elif value is not None:
        score = float(value)
    elif label:
        score = None
    else:
        return None
    return {
        "key": key,
        "score": score,
        "value": label or None,
        "comment": comment[:COMMENT_CHARS] or None,
        "feedback_id": feedback_id,
        "feedback_source_type": "model",
        "source_info": dict(extra),
        **where,
    }


class LangsmithSink:
    kind = "langsmith"

    def __init__(
        self,
        endpoint: str,
        api_key: str,
        project: str = "",
        dataset: str = "",
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.remote = _Client(endpoint, api_key, timeout_s)
        self.target = self.remote.target
        self.project = project or DEFAULT_PROJECT
        self.dataset = dataset
        self.header: RunHeader | None = None
        self.project_id: uuid.UUID | None = None
        self.dataset_id: uuid.UUID | None = None
        self.tasks: set[tuple[str, int]] = set()
        self.examples: set[str] = set()
        self.rows = 0
        self.feedback_made = 0
        self.feedback_held = 0

    def begin(self, run: RunHeader) -> None:
        from langsmith.utils import LangSmithNotFoundError

        self.header = run
        self.project_id = self.remote.project_id(self.project, create=True)
        if not self.dataset:
            return
        client = self.remote.client
        try:
            found = client.read_dataset(dataset_name=self.dataset)
        except LangSmithNotFoundError:
            found = self.remote.call(
                f"dataset {self.dataset!r}", client.create_dataset, self.dataset,
                description="evalsi records",
            )  # fmt: skip
        except Exception as e:  # noqa: BLE001
            raise self.remote.fail(e, f"dataset {self.dataset!r}") from None
        self.dataset_id = uuid.UUID(str(found.id))

    def write(self, rows: Sequence[ResultRow]) -> None:
        assert self.header is not None
        run = self.header
        runs: list[dict[str, Any]] = []
        records: list[str] = []
        feedback: list[dict[str, Any]] = []
        for row in rows:
            self.rows += 1
            run_id = task_run_id(run.run_id, row.record_id, row.trial)
            if (row.record_id, row.trial) not in self.tasks:
                self.tasks.add((row.record_id, row.trial))
                if self.dataset and row.record_id not in self.examples:
                    self.examples.add(row.record_id)
                    records.append(row.record_id)
                runs.append(self._run(run_id, {"record_id": row.record_id, "trial": row.trial}))
            item = feedback_item(
                uuid_id("langsmith.feedback", run.run_id, row.record_id, row.trial,
                        row.evaluator, row.metric),
                metric_key({"evaluator": row.evaluator, "metric": row.metric}),
                row.value, row.passed, row.label, row.explanation,
                {"evalsi_run_id": run.run_id, "outcome": row.outcome},
                run_id=run_id, trace_id=run_id, session_id=self.project_id,
            )  # fmt: skip
            if item is not None:
                feedback.append(item)
        if records:
            self._examples(records)
        self._send(runs, feedback)

    def _run(
        self, run_id: uuid.UUID, inputs: dict[str, Any], outputs: Any = None, name: str = ""
    ) -> dict[str, Any]:
        assert self.header is not None
        run = self.header
        start = _stamp(run.created_at)
        out: dict[str, Any] = {
            "id": str(run_id),
            "trace_id": str(run_id),
            "dotted_order": f"{start.strftime('%Y%m%dT%H%M%S%fZ')}{run_id}",
            "name": name or run.name or "evalsi",
            "run_type": "chain",
            "inputs": inputs,
            "start_time": start,
            "end_time": _stamp(run.finished_at or run.created_at),
            "session_name": self.project,
            "extra": {"metadata": {"evalsi_run_id": run.run_id, "evalsi_project": run.project}},
        }
        if outputs is not None:
            out["outputs"] = outputs
        if self.dataset and "record_id" in inputs:
            out["reference_example_id"] = str(self._example_id(inputs["record_id"]))
        return out

    def _example_id(self, record_id: str) -> uuid.UUID:
        return uuid_id("langsmith.example", self.dataset, record_id)

    def _examples(self, records: list[str]) -> None:
        """Create the records' examples; on a conflict (some exist: an earlier export), create
        only those the dataset lacks."""
        from langsmith.utils import LangSmithConflictError

        client = self.remote.client
        want = {self._example_id(r): r for r in records}

        def create(ids: list[uuid.UUID]) -> None:
            client.create_examples(
                dataset_id=self.dataset_id,
                examples=[{"id": i, "inputs": {"record_id": want[i]},
                           "metadata": {"evalsi_record_id": want[i]}} for i in ids],
            )  # fmt: skip

        try:
            create(list(want))
        except LangSmithConflictError:
            held: set[uuid.UUID] = set()
            ids = list(want)
            for start in range(0, len(ids), 100):
                held |= {
                    uuid.UUID(str(e.id))
                    for e in client.list_examples(
                        dataset_id=self.dataset_id, example_ids=ids[start : start + 100]
                    )
                }
            missing = [i for i in ids if i not in held]
            if missing:
                self.remote.call("creating examples", create, missing)
        except Exception as e:  # noqa: BLE001
            raise self.remote.fail(e, "creating examples") from None

    def _send(self, runs: list[dict[str, Any]], feedback: list[dict[str, Any]]) -> None:
        if runs:
            self.remote.ingest(runs)
        if feedback:
            made, held = self.remote.feedback(feedback)
            self.feedback_made += made
            self.feedback_held += held

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        assert self.header is not None
        run = self.header
        summary_id = uuid_id("langsmith.run", run.run_id, "summary")
        metrics, means = summary_scores(summary)
        gates = [{"expr": expr, "verdict": verdict} for expr, verdict in gate_lines(summary)]
        where = {"run_id": summary_id, "trace_id": summary_id, "session_id": self.project_id}
        feedback = []
        for m in means:
            extra = {"evalsi_run_id": run.run_id, **m.extra}
            feedback.append(feedback_item(
                uuid_id("langsmith.feedback", run.run_id, "summary", m.key), m.key, m.mean,
                None, None, m.comment, extra, **where))  # fmt: skip
        for i, g in enumerate(gates):
            feedback.append(feedback_item(
                uuid_id("langsmith.feedback", run.run_id, "gate", i), f"gate.{i}", None,
                g["verdict"] == "passed", None, f"{g['verdict']}: {g['expr']}",
                {"evalsi_run_id": run.run_id, "expr": g["expr"]}, **where))  # fmt: skip
        head = self._run(
            summary_id, run.to_dict(), {"metrics": metrics, "gates": gates},
            name=f"{run.name or 'evalsi'} (summary)",
        )  # fmt: skip
        self._send([head], [f for f in feedback if f is not None])
        remote = {
            "project": self.project,
            "project_id": str(self.project_id),
            "summary_run_id": str(summary_id),
            "runs": str(len(self.tasks)),
            "feedback": str(self.feedback_made + self.feedback_held),
            "feedback_already_there": str(self.feedback_held),
        }
        if self.dataset:
            remote |= {
                "dataset": self.dataset,
                "dataset_id": str(self.dataset_id),
                "examples": str(len(self.examples)),
            }
        return Receipt(self.kind, self.target, self.rows, remote)

    def close(self) -> None:
        self.remote.close()


def otel_run_id(span_id: str) -> uuid.UUID:
    """The LangSmith run of an OTel span that reached LangSmith over OTLP: the SDK's
    ``langsmith_run_id_from_otel_span_id`` (the server's rule: the span id's 8 bytes
    right-aligned in 16 zero bytes)."""
    from langsmith.integrations.otel import langsmith_run_id_from_otel_span_id

    return langsmith_run_id_from_otel_span_id(int(span_id, 16))


class LangsmithTraceSink:
    """An online policy's scores as feedback on the LangSmith runs of the traces they judge.

    A trace sent to LangSmith over OpenTelemetry becomes runs whose ids LangSmith derives from
    the span ids (``otel_run_id``), so a score of a root span is feedback on that span's run.
    A score without a span id names the trace alone: its id is read as a UUID of the OTel trace
    id's 16 bytes, the form LangSmith's own OTel exporter gives a trace (an assumption for
    traces that began outside LangSmith). ``project`` is where those traces went; the feedback
    is filed there."""

    kind = "langsmith"

    def __init__(
        self, endpoint: str, api_key: str, project: str = "", timeout_s: float = TIMEOUT_S
    ) -> None:
        self.remote = _Client(endpoint, api_key, timeout_s)
        self.target = self.remote.target
        self.project = project or DEFAULT_PROJECT
        self.project_id: uuid.UUID | None = None

    def send(self, scores: Sequence[TraceScore]) -> Receipt:
        if self.project_id is None:
            self.project_id = self.remote.project_id(self.project, create=False)
        items = []
        for s in scores:
            where: dict[str, Any] = {"session_id": self.project_id}
            if s.span_id:
                where["run_id"] = otel_run_id(s.span_id)
            else:
                where["trace_id"] = uuid.UUID(hex=s.trace_id)
            item = feedback_item(
                uuid_id("langsmith.trace-score", s.score_id),
                metric_key({"evaluator": s.evaluator, "metric": s.metric}),
                s.value, s.passed, s.label, s.explanation,
                {"evalsi_policy": s.policy, "evalsi_run_id": s.run_id, "outcome": s.outcome,
                 "otel_trace_id": s.trace_id},
                **where,
            )  # fmt: skip
            if item is not None:
                items.append(item)
        made, held = self.remote.feedback(items)
        return Receipt(
            self.kind, self.target, len(scores),
            {"feedback": str(made + held), "already_there": str(held),
             "skipped": str(len(scores) - len(items))},
        )  # fmt: skip

    def close(self) -> None:
        self.remote.close()


__all__ = [
    "LANGSMITH_ENDPOINT",
    "LangsmithSink",
    "LangsmithTraceSink",
    "feedback_item",
    "otel_run_id",
]
