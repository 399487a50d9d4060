"""IngestService calls for ``AsyncClient`` (a mixin, as ``_policies`` is for the PolicyService):
``ingest``, results computed elsewhere stored on the server as a Score run.

What fits one request (``ONE_SHOT_RECORDS`` records and ``ONE_SHOT_BYTES``) goes in one Ingest
call; more goes in chunks of that size: StartIngest, AppendIngest per chunk, FinalizeIngest.
Every call is retried on what a later attempt may get past (429, 5xx, a dropped or refused
connection, a timeout) and on nothing else: the server makes each call idempotent on the
client key, so a retry whose first attempt did land stores nothing twice. The waits are
``INGEST_RETRY``'s: 250, 750 and 1750 ms, each ± 20 %, or the server's ``Retry-After`` when
longer, through the connectors' ``retrying`` loop.

``AsyncIngestMixin`` needs what ``AsyncClient`` has: ``url``, ``settings``, ``_transport``,
``max_request_bytes`` and ``_pages_of``; it builds its ``IngestServiceClient`` on first use.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from connectrpc.client import ResponseMetadata
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from pyqwest import Client as HTTPClient
from pyqwest import HTTPTransport

from evalsi._proto.evalsi.v1alpha1 import ingest_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.ingest_service_connect import IngestServiceClient
from evalsi.client._common import Settings
from evalsi.client._errors import translate
from evalsi.client._ingest_rows import IngestItems, Item, external_evaluators, external_source
from evalsi.client._results import RemoteScoreResult, ResultPages
from evalsi.connectors import (
    SYSTEM_CLOCK,
    Clock,
    InfraError,
    RetryPolicy,
    parse_retry_after,
    retrying,
)
from evalsi.core import EvalsiError, UserError
from evalsi.runs import isolation_from_dicts
from evalsi.wire import run_info_from_proto, struct_from_proto, summary_from_proto

T = TypeVar("T")

ONE_SHOT_RECORDS = 200
ONE_SHOT_BYTES = 1024 * 1024
"""An ingest this small (records and encoded bytes) is one Ingest call; a larger one is sent
in chunks of this size."""


@dataclass(frozen=True, slots=True)
class IngestRetry(RetryPolicy):
    """``RetryPolicy`` with set waits instead of an exponential ceiling: before retry ``n``,
    ``delays[n-1]`` (the last for later ones) times a uniform factor in ``1 ± jitter``, so
    clients that failed together do not come back together."""

    max_attempts: int = 4
    delays: tuple[float, ...] = (0.25, 0.75, 1.75)
    jitter: float = 0.2
    deadline: float | None = 120.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        base = self.delays[min(max(attempt, 1), len(self.delays)) - 1]
        return base * rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)


INGEST_RETRY = IngestRetry()

_TRANSIENT = frozenset({Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.INTERNAL, Code.UNKNOWN})
"""Codes worth another attempt when no HTTP status tells more: no answer at all (a dropped or
refused connection, a timeout) or a gRPC status carried in trailers."""


def retryable(code: Code, status: int | None) -> bool:
    """Whether a call that failed with ``code`` (HTTP ``status``, when one came) may succeed if
    sent again: 429 and 5xx but 501, or no answer; never another 4xx. A 429 that carries
    RESOURCE_EXHAUSTED is evalsi's own body-too-large (Connect's mapping of it): sent again it
    stays too large."""
    if status is None or status == 200:
        return code in _TRANSIENT
    if status == 429:
        return code != Code.RESOURCE_EXHAUSTED
    return status >= 500 and status != 501


class AsyncIngestMixin:
    """``ingest``."""

    url: str
    settings: Settings
    max_request_bytes: int
    _transport: HTTPTransport
    _pages_of: Callable[[str], ResultPages]
    _ingest_client: IngestServiceClient | None = None

    @property
    def _ingestion(self) -> IngestServiceClient:
        if self._ingest_client is None:
            self._ingest_client = IngestServiceClient(
                self.url,
                protocol=self.settings.protocol_type,
                http_client=HTTPClient(self._transport),
                send_compression=None,
            )
        return self._ingest_client

    async def ingest(
        self,
        /,
        data: str | os.PathLike[str] | Iterable[Item],
        evaluators: Iterable[str | Mapping[str, Any]] | None = None,
        *,
        client_key: str | None = None,
        name: str = "",
        project_id: str = "",
        source: Mapping[str, str] | None = None,
        progress: Callable[[int, int], None] | None = None,
        retry: RetryPolicy = INGEST_RETRY,
        clock: Clock = SYSTEM_CLOCK,
    ) -> RemoteScoreResult:
        """``Client.ingest``, awaited."""
        items = IngestItems(data)
        given = list(evaluators or ())
        header: dict[str, Any] = {
            "client_key": client_key or uuid.uuid4().hex,
            "project_id": project_id,
            "name": name,
            "source": external_source(source),
        }
        call = _Caller(self.settings, self.url, retry, clock)
        limit = min(ONE_SHOT_BYTES, self.max_request_bytes)
        chunks = _chunks(iter(items), ONE_SHOT_RECORDS, limit)
        first = next(chunks, None)
        if first is None:
            raise UserError("data: no record to ingest", hint="give records with their results")
        following = next(chunks, None)
        if following is None:  # it all fits one call; the server declares what results name
            evaluators_sent = external_evaluators(given, ())
            request = pb.IngestRequest(**header, evaluators=evaluators_sent, records=first)
            done: Any = await call(self._ingestion.ingest, request)
            if progress is not None:
                progress(len(first), 0)
            return self._ingest_result(done.run, project_id)
        # Chunks may name only what the start declared: every evaluator the results name.
        declared = external_evaluators(given, items.evaluator_names())
        start = pb.StartIngestRequest(**header, evaluators=declared)
        started = await call(self._ingestion.start_ingest, start)
        if started.already_finalized:  # this key's ingest completed before: nothing to send
            return self._ingest_result(started.run, project_id)
        offset = 0
        for chunk in _chained(first, following, chunks):
            append = pb.AppendIngestRequest(
                run_id=started.run_id, project_id=project_id, offset=offset, records=chunk
            )
            await call(self._ingestion.append_ingest, append)
            offset += len(chunk)
            if progress is not None:
                progress(offset, 0)
        finalize = pb.FinalizeIngestRequest(run_id=started.run_id, project_id=project_id)
        done = await call(self._ingestion.finalize_ingest, finalize)
        return self._ingest_result(done.run, project_id)

    def _ingest_result(self, run: run_pb.Run, project_id: str) -> RemoteScoreResult:
        """The stored run as ``evalsi.evaluate`` answers a Score run."""
        info = run_info_from_proto(run)
        details = struct_from_proto(run.details)
        summary = info.summary or {}
        return RemoteScoreResult(
            run_id=info.id,
            status=info.status,
            records=info.records,
            metrics=[summary_from_proto(m) for m in run.metrics],
            dataset_source=str((summary.get("dataset") or {}).get("source") or ""),
            dataset_version=str(run.dataset_version) or None,
            evaluators=info.evaluators,
            warnings=list(summary.get("warnings") or []),
            isolation=isolation_from_dicts(details.get("isolation")),
            pages=self._pages_of(project_id),
        )


class _Caller:
    """One RPC, sent again while the failure is one a later attempt may get past."""

    def __init__(self, settings: Settings, url: str, policy: RetryPolicy, clock: Clock) -> None:
        self.settings = settings
        self.url = url
        self.policy = policy
        self.clock = clock

    async def __call__(self, method: Callable[..., Awaitable[T]], request: Any) -> T:
        async def attempt() -> T:
            with ResponseMetadata() as answer:
                try:
                    return await method(
                        request, headers=self.settings.headers, timeout_ms=self.settings.timeout_ms
                    )
                except ConnectError as e:
                    status = answer.http_status
                    if not retryable(e.code, status):
                        raise
                    wait = parse_retry_after(answer.headers.get("retry-after"))
                    raise InfraError(
                        _kind(e.code, status), e.message, status=status, retry_after=wait
                    ) from e

        try:
            result, _ = await retrying(attempt, self.policy, clock=self.clock)
        except InfraError as e:
            cause = e.__cause__ if e.__cause__ is not None else e
            error = translate(cause, self.url)
            if e.attempts > 1:
                error.message = f"{error.message} (after {e.attempts} attempts)"
                error.args = (error.message,)
            raise error from cause
        except EvalsiError:
            raise
        except (ConnectError, OSError, RuntimeError, ValueError) as e:
            raise translate(e, self.url) from e
        return result


def _kind(code: Code, status: int | None) -> Any:
    if status == 429:
        return "rate_limited"
    if status is not None and status != 200:
        return "server_error"
    return "timeout" if code == Code.DEADLINE_EXCEEDED else "connection"


def _chunks(
    messages: Iterator[pb.IngestRecord], most: int, limit: int
) -> Iterator[list[pb.IngestRecord]]:
    """Consecutive records, at most ``most`` and about ``limit`` encoded bytes a chunk (a record
    larger than that goes alone; the server's body cap decides)."""
    chunk: list[pb.IngestRecord] = []
    size = 0
    for message in messages:
        grown = size + message.ByteSize() + 8  # the field's tag and length, at most
        if chunk and (len(chunk) >= most or grown > limit):
            yield chunk
            chunk, grown = [], message.ByteSize() + 8
        chunk.append(message)
        size = grown
    if chunk:
        yield chunk


def _chained(
    first: list[pb.IngestRecord],
    second: list[pb.IngestRecord],
    rest: Iterator[list[pb.IngestRecord]],
) -> Iterator[list[pb.IngestRecord]]:
    yield first
    yield second
    yield from rest
