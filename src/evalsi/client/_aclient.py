"""``evalsi.AsyncClient``: ``Client``'s calls as coroutines and async iterators, for asyncio
callers (agent platforms, web handlers) that must not block their event loop."""

from __future__ import annotations

import asyncio
import atexit
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from connectrpc.errors import ConnectError
from pyqwest import Client as HTTPClient
from pyqwest import HTTPTransport, HTTPVersion

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat_pb
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import CatalogServiceClient
from evalsi._proto.evalsi.v1alpha1.dataset_service_connect import DatasetServiceClient
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import EvaluationServiceClient
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClient
from evalsi._proto.evalsi.v1alpha1.trace_service_connect import TraceServiceClient
from evalsi.client._agents import AsyncAgentMixin
from evalsi.client._auth import AsyncAuthMixin
from evalsi.client._bridge import LoopThread
from evalsi.client._common import (
    DEFAULT_TIMEOUT,
    WATCH_PAGE,
    StreamUpdate,
    check_gates,
    check_local_only,
    exact_refs,
    gate_list,
    scoped,
    settings,
    spec_dicts,
    stream_update,
)
from evalsi.client._datasets import AsyncDatasetMixin
from evalsi.client._errors import translate
from evalsi.client._ingest import AsyncIngestMixin
from evalsi.client._policies import AsyncPolicyMixin
from evalsi.client._promotion import AsyncPromotionMixin
from evalsi.client._requests import (
    DEFAULT_MAX_REQUEST_BYTES,
    evaluate_options,
    evaluator_specs,
    read_records,
    record_batches,
)
from evalsi.client._requests import instance_name as evaluator_name
from evalsi.client._results import (
    RemoteRunResult,
    RemoteScoreResult,
    ResultPages,
    ordered_results,
    remote_run_result,
    score_result,
)
from evalsi.client._reviews import AsyncReviewMixin
from evalsi.client._specs import (
    document_for_server,
    eval_run_proto,
    load_spec,
    local_dataset,
)
from evalsi.client._traces import AsyncTraceMixin
from evalsi.core import EvalsiError, EvaluationResult, EvaluatorManifest, RunInfo
from evalsi.datasets import FieldMap, open_dataset
from evalsi.evidence import Written
from evalsi.runs import CategoryMetrics, Comparison, RunSpec
from evalsi.wire import (
    ConnectorInfo,
    PackInfo,
    category_from_proto,
    comparison_from_proto,
    connector_from_proto,
    gate_from_proto,
    manifest_from_proto,
    pack_from_proto,
    record_to_proto,
    result_from_proto,
    run_from_proto,
    run_info_from_proto,
    task_from_proto,
    warning_to_proto,
)

T = TypeVar("T")

# pyqwest's async transport runs on a Tokio runtime that is never shut down: a worker thread
# still dropping a connection while the interpreter finalizes panics, and the process aborts
# (SIGABRT, exit 134) after its work is done, in about 1 of 20-50 short runs here. Giving
# those tasks a moment at exit, while Python is still whole, removed it (0 of 200).
_EXIT_GRACE_S = 0.05
_exit_grace_registered = False


def _register_exit_grace() -> None:
    global _exit_grace_registered
    if not _exit_grace_registered:
        atexit.register(time.sleep, _EXIT_GRACE_S)
        _exit_grace_registered = True


class AsyncClient(
    AsyncPolicyMixin,
    AsyncTraceMixin,
    AsyncIngestMixin,
    AsyncReviewMixin,
    AsyncAuthMixin,
    AsyncDatasetMixin,
    AsyncAgentMixin,
    AsyncPromotionMixin,
):
    """The async twin of ``evalsi.Client`` (same arguments, same methods, awaited).

    A result's ``results`` property reads pages with a short-lived sync client, since
    ``ScoreResult.results`` is not a coroutine.

    Example:
        >>> import evalsi
        >>> async def main() -> None:  # doctest: +SKIP
        ...     async with evalsi.AsyncClient("http://127.0.0.1:8080") as client:
        ...         run = await client.create_run("run.yaml")
        ...         print(run.table())
    """

    def __init__(
        self,
        url: str,
        *,
        protocol: Literal["connect", "grpc", "grpc-web"] = "connect",
        timeout: float | None = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        token: str | None = None,
        api_key: str | None = None,
        project: str | None = None,
    ) -> None:
        self.settings = settings(url, protocol, timeout, headers, token, api_key, project)
        self.url = self.settings.url
        self.max_request_bytes = max_request_bytes
        _register_exit_grace()
        http2 = protocol == "grpc"
        self._transport = HTTPTransport(http_version=HTTPVersion.HTTP2 if http2 else None)
        kw: dict[str, Any] = {
            "protocol": self.settings.protocol_type,
            "http_client": HTTPClient(self._transport),
            "send_compression": None,
        }
        self._evaluation = EvaluationServiceClient(self.url, **kw)
        self._runs = RunServiceClient(self.url, **kw)
        self._catalog = CatalogServiceClient(self.url, **kw)
        self._datasets = DatasetServiceClient(self.url, **kw)
        self._traces = TraceServiceClient(self.url, **kw)
        # Where a result's sync ``results`` reads pages: a short-lived sync client, unless a
        # ``Client`` runs this one and pages through itself.
        self._pages: Callable[[str, str], Iterator[EvaluationResult]] = self._sync_pages

    async def close(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<evalsi.AsyncClient {self.url} ({self.settings.protocol})>"

    def _twin(self) -> AsyncClient:
        """A new client with these settings (a client belongs to the loop that first uses it)."""
        s = self.settings
        return AsyncClient(
            s.url,
            protocol=s.protocol,
            timeout=s.timeout,
            headers=s.headers,
            max_request_bytes=self.max_request_bytes,
            project=s.project,
        )

    # -- plumbing -------------------------------------------------------------------------------
    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(
                scoped(request, self.settings.project),
                headers=self.settings.headers,
                timeout_ms=self.settings.timeout_ms,
            )
        except EvalsiError:
            raise
        except (ConnectError, OSError, RuntimeError, ValueError) as e:
            raise translate(e, self.url) from e

    async def _stream(self, messages: AsyncIterator[T]) -> AsyncIterator[T]:
        try:
            async for message in messages:
                yield message
        except EvalsiError:
            raise
        except (ConnectError, OSError, RuntimeError, ValueError) as e:
            raise translate(e, self.url) from e

    async def _paged(
        self, method: Callable[..., Any], request: Any, field: str, limit: int
    ) -> list[Any]:
        """Up to ``limit`` items of a listing, following its pages."""
        out: list[Any] = []
        while len(out) < limit:
            request.page_size = min(limit - len(out), 1000)
            page = await self._call(method, request)
            items = getattr(page, field)
            out.extend(items)
            request.page_token = page.next_page_token
            if not request.page_token or not items:
                break
        return out[:limit]

    def _sync_pages(self, run_id: str, project_id: str = "") -> Iterator[EvaluationResult]:
        # A short-lived client with these settings on a loop of its own (what a sync ``Client``
        # is made of), so a result can be read from code that runs no loop.
        loop = LoopThread(f"evalsi-client {self.url}")
        client = self._twin()
        try:
            for page in loop.iterate(client.list_run_results(run_id, project_id=project_id)):
                yield from page
        finally:
            try:
                loop.run(client.close())
            finally:
                loop.stop()

    # -- EvaluationService ----------------------------------------------------------------------
    async def evaluate(
        self,
        /,
        data: Any,
        evaluators: Iterable[Any],
        *,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        fields: FieldMap | None = None,
        cluster_by: str | None = None,
        bootstrap: Literal["percentile", "bca"] | None = None,
        seed: int = 0,
        on_bad_record: Literal["fail", "skip"] = "fail",
        progress: Callable[[int, int], None] | None = None,
        gates: str | Sequence[str] = (),
        min_completion_rate: float = 0.8,
        max_evaluator_error_rate: float = 0.1,
        concurrency: int = 0,
        name: str = "",
        project_id: str = "",
        **local_only: Any,
    ) -> RemoteScoreResult:
        """``Client.evaluate``, awaited."""
        check_local_only(local_only)
        specs = evaluator_specs(evaluators, params)
        wanted = gate_list(gates)
        local = read_records(data, fields=fields, on_bad_record=on_bad_record)
        request = ev_pb.EvaluateRequest(
            records=local.records,
            evaluators=specs,
            cluster_by=cluster_by or "",
            options=evaluate_options(bootstrap=bootstrap, seed=seed, concurrency=concurrency),
            name=name,
            project_id=project_id,
            gates=wanted,
            min_completion_rate=min_completion_rate,
            max_evaluator_error_rate=max_evaluator_error_rate,
            warnings=[warning_to_proto(w) for w in local.warnings],
            dataset_version=local.version or "",
        )
        if request.ByteSize() <= self.max_request_bytes:
            response = await self._call(self._evaluation.evaluate, request)
        else:
            response = await self._evaluate_streamed(request)
        if progress is not None:
            progress(len(local.records), local.bad_records)
        check_gates(wanted, response.gates, self.url)
        results = ordered_results(response.results, local.ids, [evaluator_name(s) for s in specs])
        return score_result(
            response,
            source=local.source,
            local_version=local.version,
            bad_records=local.bad_records,
            bad_examples=local.bad_examples,
            evaluators=spec_dicts(specs, exact_refs(results)),
            results=results,
            gates=[gate_from_proto(g) for g in response.gates],
            pages=self._pages_of(request.project_id),
            warnings=local.warnings,
        )

    async def _evaluate_streamed(self, request: ev_pb.EvaluateRequest) -> ev_pb.EvaluateResponse:
        # The request's fields but its records, which follow in batches.
        fields = ev_pb.EvaluateStreamConfig.DESCRIPTOR.fields
        config = ev_pb.EvaluateStreamConfig(**{f.name: getattr(request, f.name) for f in fields})
        scoped(config, self.settings.project)

        async def messages() -> AsyncIterator[ev_pb.EvaluateStreamRequest]:
            yield ev_pb.EvaluateStreamRequest(config=config)
            for batch in record_batches(request.records, self.max_request_bytes):
                yield ev_pb.EvaluateStreamRequest(records=batch)

        out = ev_pb.EvaluateResponse(records=len(request.records), status="done")
        stream = self._evaluation.evaluate_stream(messages(), headers=self.settings.headers)
        async for message in self._stream(stream):
            out.run_id = message.run_id or out.run_id
            out.results.extend(message.results)
            if message.metrics:
                del out.metrics[:]
                out.metrics.extend(message.metrics)
            if message.gates:
                del out.gates[:]
                out.gates.extend(message.gates)
            out.warnings.extend(message.warnings)  # only the last message has any
            out.dataset_version = message.dataset_version or out.dataset_version
        return out

    async def evaluate_stream(
        self,
        data: Any,
        evaluators: Iterable[Any],
        *,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        fields: FieldMap | None = None,
        cluster_by: str | None = None,
        bootstrap: Literal["percentile", "bca"] | None = None,
        seed: int = 0,
        on_bad_record: Literal["fail", "skip"] = "fail",
        batch_size: int = 1000,
        concurrency: int = 0,
        project_id: str = "",
    ) -> AsyncIterator[StreamUpdate]:
        """``Client.evaluate_stream`` as an async iterator."""
        config = ev_pb.EvaluateStreamConfig(
            evaluators=evaluator_specs(evaluators, params),
            cluster_by=cluster_by or "",
            options=evaluate_options(bootstrap=bootstrap, seed=seed, concurrency=concurrency),
            project_id=project_id or self.settings.project,
        )
        batches = open_dataset(data, fields=fields, on_bad_record=on_bad_record).iter_batches(
            batch_size
        )

        async def messages() -> AsyncIterator[ev_pb.EvaluateStreamRequest]:
            yield ev_pb.EvaluateStreamRequest(config=config)
            # Read in a worker thread, batch by batch: a slow iterable must not hold up the loop
            # that receives the answers meanwhile (the caller's, or a Client's own).
            while (batch := await asyncio.to_thread(next, batches, None)) is not None:
                yield ev_pb.EvaluateStreamRequest(records=[record_to_proto(r) for r in batch])

        stream = self._evaluation.evaluate_stream(messages(), headers=self.settings.headers)
        async for message in self._stream(stream):
            yield stream_update(message)

    # -- RunService -----------------------------------------------------------------------------
    async def create_run(
        self,
        spec: RunSpec | Mapping[str, Any] | str | os.PathLike[str],
        *,
        dry_run: bool = False,
        wait: bool = True,
        project_id: str = "",
        progress: Callable[[int, int], None] | None = None,
    ) -> RemoteRunResult:
        """``Client.create_run``, awaited."""
        loaded = load_spec(spec)
        local = local_dataset(loaded)
        uploaded = await self.upload_dataset(local, project_id=project_id) if local else None
        server_path = uploaded.path if uploaded is not None else None
        request = run_pb.CreateRunRequest(
            run=eval_run_proto(document_for_server(loaded, server_path)),
            project_id=project_id,
            dry_run=dry_run,
        )
        run = (await self._call(self._runs.create_run, request)).run
        if dry_run or not wait:
            return self._result(run, project_id)
        return await self.wait_run(run.id, progress=progress, project_id=project_id)

    # A run is found by id only within its project (empty: "default"), so every read by id
    # takes the project it was created in.
    async def wait_run(
        self,
        run_id: str,
        *,
        progress: Callable[[int, int], None] | None = None,
        project_id: str = "",
    ) -> RemoteRunResult:
        async for snapshot in self._watch(run_id, project_id):
            if progress is not None:
                progress(int(snapshot.progress.tasks_done), int(snapshot.progress.infra_errors))
        return await self.get_run(run_id, project_id=project_id)

    async def get_run(self, run_id: str, *, project_id: str = "") -> RemoteRunResult:
        request = run_pb.GetRunRequest(id=run_id, project_id=project_id)
        response = await self._call(self._runs.get_run, request)
        return self._result(response.run, project_id)

    async def run_info(self, run_id: str, *, project_id: str = "") -> RunInfo:
        request = run_pb.GetRunRequest(id=run_id, project_id=project_id)
        response = await self._call(self._runs.get_run, request)
        return run_info_from_proto(response.run)

    async def list_runs(
        self, *, limit: int = 20, kind: str = "", status: str = "", project_id: str = ""
    ) -> list[RunInfo]:
        request = run_pb.ListRunsRequest(kind=kind, status=status, project_id=project_id)
        found = await self._paged(self._runs.list_runs, request, "runs", limit)
        return [run_info_from_proto(r) for r in found]

    async def watch_run(
        self, run_id: str, *, project_id: str = ""
    ) -> AsyncIterator[RemoteRunResult]:
        async for run in self._watch(run_id, project_id):
            yield self._result(run, project_id)

    async def _watch(self, run_id: str, project_id: str = "") -> AsyncIterator[run_pb.Run]:
        stream = self._runs.watch_run(
            scoped(run_pb.WatchRunRequest(id=run_id, project_id=project_id), self.settings.project),
            headers=self.settings.headers,
        )
        async for message in self._stream(stream):
            yield message.run

    async def cancel_run(self, run_id: str, *, project_id: str = "") -> RemoteRunResult:
        request = run_pb.CancelRunRequest(id=run_id, project_id=project_id)
        response = await self._call(self._runs.cancel_run, request)
        return self._result(response.run, project_id)

    async def resume_run(
        self,
        run_id: str,
        *,
        wait: bool = False,
        progress: Callable[[int, int], None] | None = None,
        project_id: str = "",
    ) -> RemoteRunResult:
        request = run_pb.ResumeRunRequest(id=run_id, project_id=project_id)
        response = await self._call(self._runs.resume_run, request)
        if wait:
            return await self.wait_run(response.run.id, progress=progress, project_id=project_id)
        return self._result(response.run, project_id)

    async def list_run_results(
        self, run_id: str, *, page_size: int = WATCH_PAGE, project_id: str = ""
    ) -> AsyncIterator[list[EvaluationResult]]:
        token = ""
        while True:
            request = run_pb.ListRunResultsRequest(
                id=run_id, page_size=page_size, page_token=token, project_id=project_id
            )
            page = await self._call(self._runs.list_run_results, request)
            yield [result_from_proto(r) for r in page.results]
            token = page.next_page_token
            if not token or not page.results:
                return

    async def list_run_tasks(
        self, run_id: str, *, page_size: int = 100, project_id: str = ""
    ) -> AsyncIterator[list[dict[str, Any]]]:
        token = ""
        while True:
            request = run_pb.ListRunTasksRequest(
                id=run_id, page_size=page_size, page_token=token, project_id=project_id
            )
            page = await self._call(self._runs.list_run_tasks, request)
            yield [task_from_proto(t) for t in page.tasks]
            token = page.next_page_token
            if not token or not page.tasks:
                return

    async def run_categories(
        self, run_id: str, key: str = "category", *, project_id: str = ""
    ) -> list[CategoryMetrics]:
        """A Run's metrics per category of sample (``metadata[key]``), as ``evalsi run``
        prints them; empty when no sample has ``key``."""
        request = run_pb.GetRunCategoriesRequest(id=run_id, key=key, project_id=project_id)
        response = await self._call(self._runs.get_run_categories, request)
        return [category_from_proto(c) for c in response.categories]

    async def export_bundle(
        self, run_id: str, out: str | os.PathLike[str], *, project_id: str = ""
    ) -> Written:
        """The finished run sealed as an evidence bundle into the new directory ``out``
        (``evalsi bundle RUN -o DIR --server URL``), validated once it arrived."""
        from evalsi.evidence import Receiver

        receiver = Receiver(out)
        stream = self._runs.export_bundle(
            scoped(
                run_pb.ExportBundleRequest(id=run_id, project_id=project_id), self.settings.project
            ),
            headers=self.settings.headers,
        )
        try:
            async for message in self._stream(stream):
                receiver.chunk(message.path, message.data, message.run_id)
        except BaseException:
            receiver.abandon()
            raise
        return receiver.finish()

    async def compare_runs(
        self,
        baseline: str,
        candidate: str,
        *,
        level: float = 0.95,
        seed: int = 0,
        metrics: Sequence[str] | None = None,
        project_id: str = "",
    ) -> Comparison:
        request = run_pb.CompareRunsRequest(
            baseline=baseline,
            candidate=candidate,
            level=level,
            seed=seed,
            metrics=metrics or (),
            project_id=project_id,
        )
        response = await self._call(self._runs.compare_runs, request)
        return comparison_from_proto(response)

    def _result(self, run: run_pb.Run, project_id: str = "") -> RemoteRunResult:
        return remote_run_result(run_from_proto(run), self._pages_of(project_id))

    def _pages_of(self, project_id: str) -> ResultPages:
        """Where a result of ``project_id`` reads its pages."""

        def pages(run_id: str) -> Iterator[EvaluationResult]:
            return self._pages(run_id, project_id)

        return pages

    # -- CatalogService -------------------------------------------------------------------------
    async def list_evaluators(self, *, pack: str = "") -> list[EvaluatorManifest]:
        request = cat_pb.ListEvaluatorsRequest(pack=pack)
        response = await self._call(self._catalog.list_evaluators, request)
        return [manifest_from_proto(m) for m in response.evaluators]

    async def get_evaluator(self, ref: str) -> EvaluatorManifest:
        request = cat_pb.GetEvaluatorRequest(ref=ref)
        response = await self._call(self._catalog.get_evaluator, request)
        return manifest_from_proto(response.evaluator)

    async def list_packs(self) -> list[PackInfo]:
        response = await self._call(self._catalog.list_packs, cat_pb.ListPacksRequest())
        return [pack_from_proto(p) for p in response.packs]

    async def list_connectors(self) -> list[ConnectorInfo]:
        response = await self._call(self._catalog.list_connectors, cat_pb.ListConnectorsRequest())
        return [connector_from_proto(c) for c in response.connectors]
