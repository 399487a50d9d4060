"""``evalsi.Client``: every RPC of ``evalsi serve`` from Python, returning the embedded API's
result types (``ScoreResult``, ``RunResult``, ``Comparison``, ``EvaluatorManifest``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from connectrpc.errors import ConnectError
from pyqwest import HTTPVersion, SyncClient, SyncHTTPTransport

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat_pb
from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as ds_pb
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.catalog_service_connect import CatalogServiceClientSync
from evalsi._proto.evalsi.v1alpha1.dataset_service_connect import DatasetServiceClientSync
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import EvaluationServiceClientSync
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.client import _common as common
from evalsi.client._errors import translate
from evalsi.client._requests import (
    DEFAULT_MAX_REQUEST_BYTES,
    evaluate_options,
    evaluator_specs,
    read_records,
    record_batches,
)
from evalsi.client._requests import (
    instance_name as evaluator_name,
)
from evalsi.client._results import (
    RemoteRunResult,
    RemoteScoreResult,
    ordered_results,
    remote_run_result,
    run_info,
    score_result,
)
from evalsi.client._specs import (
    dataset_name,
    document_for_server,
    eval_run_proto,
    load_spec,
    local_dataset,
    raw_rows,
    row_chunks,
)
from evalsi.core import EvalsiError, EvaluationResult, EvaluatorManifest
from evalsi.datasets import FieldMap, open_dataset
from evalsi.runs import Comparison, RunSpec, evaluate_gates
from evalsi.store import RunInfo
from evalsi.wire import (
    comparison_from_proto,
    manifest_from_proto,
    record_to_proto,
    result_from_proto,
    run_from_proto,
)

T = TypeVar("T")
FINISHED = frozenset({"done", "stopped", "incomplete", "failed", "interrupted", "cancelled"})


class Client:
    """A connection to an ``evalsi serve`` server.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8080``.
        protocol: ``"connect"`` (HTTP/1.1, the default), ``"grpc"`` (HTTP/2) or ``"grpc-web"``.
        timeout: seconds each unary call may take (streams such as ``watch_run`` have none).
        headers: sent with every call (e.g. an authorization header).
        max_request_bytes: requests are split below this size (the server caps bodies).

    Example:
        >>> import evalsi
        >>> with evalsi.Client("http://127.0.0.1:8080") as client:  # doctest: +SKIP
        ...     r = client.evaluate([{"output": "Paris", "reference": "Paris"}], ["exact-match"])
        >>> r.metric("exact-match").mean  # doctest: +SKIP
        1.0
    """

    def __init__(
        self,
        url: str,
        *,
        protocol: Literal["connect", "grpc", "grpc-web"] = "connect",
        timeout: float | None = common.DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        self.settings = common.settings(url, protocol, timeout, headers)
        self.url = self.settings.url
        self.max_request_bytes = max_request_bytes
        http2 = protocol == "grpc"
        self._transport = SyncHTTPTransport(http_version=HTTPVersion.HTTP2 if http2 else None)
        http = SyncClient(self._transport)
        kw: dict[str, Any] = {
            "protocol": self.settings.protocol_type,
            "http_client": http,
            "send_compression": None,  # loopback and LAN: compression costs more than it saves
        }
        self._evaluation = EvaluationServiceClientSync(self.url, **kw)
        self._runs = RunServiceClientSync(self.url, **kw)
        self._catalog = CatalogServiceClientSync(self.url, **kw)
        self._datasets = DatasetServiceClientSync(self.url, **kw)
        self._aio: Any = None

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def aio(self) -> Any:
        """An ``AsyncClient`` with the same settings (created on first use)."""
        if self._aio is None:
            from evalsi.client._aclient import AsyncClient

            s = self.settings
            self._aio = AsyncClient(
                s.url,
                protocol=s.protocol,
                timeout=s.timeout,
                headers=s.headers,
                max_request_bytes=self.max_request_bytes,
            )
        return self._aio

    def __repr__(self) -> str:
        return f"<evalsi.Client {self.url} ({self.settings.protocol})>"

    # -- plumbing -------------------------------------------------------------------------------
    def _call(self, method: Callable[..., T], request: Any) -> T:
        try:
            return method(
                request, headers=self.settings.headers, timeout_ms=self.settings.timeout_ms
            )
        except EvalsiError:
            raise
        except (ConnectError, OSError, RuntimeError, ValueError) as e:
            raise translate(e, self.url) from e

    def _stream(self, messages: Iterator[T]) -> Iterator[T]:
        try:
            yield from messages
        except EvalsiError:
            raise
        except (ConnectError, OSError, RuntimeError, ValueError) as e:
            raise translate(e, self.url) from e

    def _pages(self, run_id: str) -> Iterator[EvaluationResult]:
        for page in self.list_run_results(run_id):
            yield from page

    # -- EvaluationService ----------------------------------------------------------------------
    def evaluate(
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
        progress: Callable[[int, int], None] | None = None,
        gates: str | Sequence[str] = (),
        min_completion_rate: float = 0.8,
        max_evaluator_error_rate: float = 0.1,
        concurrency: int = 0,
        **local_only: Any,
    ) -> RemoteScoreResult:
        """Grade records on the server; the arguments are ``evalsi.evaluate``'s.

        ``data`` is read here (a path, an ``hf://`` URI from the local cache, dicts or
        ``Record``s) and sent with the request; gates are checked here on the returned metrics.
        ``results`` holds every result without a local store.
        """
        common.check_local_only(local_only)
        specs = evaluator_specs(evaluators, params)
        rates = {
            "min_completion_rate": min_completion_rate,
            "max_evaluator_error_rate": max_evaluator_error_rate,
        }
        checked = []
        if gates:
            found = [self.get_evaluator(s.ref) for s in specs]
            checked = common.parsed_gates(gates, common.gate_targets(specs, found), rates)
        local = read_records(data, fields=fields, on_bad_record=on_bad_record)
        request = ev_pb.EvaluateRequest(
            records=local.records,
            evaluators=specs,
            cluster_by=cluster_by or "",
            options=evaluate_options(bootstrap=bootstrap, seed=seed, concurrency=concurrency),
        )
        if request.ByteSize() <= self.max_request_bytes:
            response = self._call(self._evaluation.evaluate, request)
        else:
            response = self._evaluate_streamed(request)
        if progress is not None:
            progress(len(local.records), local.bad_records)
        names = [evaluator_name(s) for s in specs]
        results = ordered_results(response.results, local.ids, names)
        metrics_result = score_result(
            response,
            source=local.source,
            local_version=local.version,
            bad_records=local.bad_records,
            bad_examples=local.bad_examples,
            evaluators=common.spec_dicts(specs, common.exact_refs(results)),
            results=results,
            gates=[],
            pages=self._pages,
        )
        if checked:
            metrics_result.gates = evaluate_gates(checked, metrics_result.metrics, **rates)
        return metrics_result

    def _evaluate_streamed(self, request: ev_pb.EvaluateRequest) -> ev_pb.EvaluateResponse:
        """One large Evaluate sent as an EvaluateStream, its answers gathered into one."""
        config = ev_pb.EvaluateStreamConfig(
            evaluators=request.evaluators, cluster_by=request.cluster_by, options=request.options
        )

        def messages() -> Iterator[ev_pb.EvaluateStreamRequest]:
            yield ev_pb.EvaluateStreamRequest(config=config)
            for batch in record_batches(request.records, self.max_request_bytes):
                yield ev_pb.EvaluateStreamRequest(records=batch)

        out = ev_pb.EvaluateResponse(records=len(request.records), status="done")
        stream = self._evaluation.evaluate_stream(messages(), headers=self.settings.headers)
        for message in self._stream(stream):
            out.run_id = message.run_id or out.run_id
            out.results.extend(message.results)
            if message.metrics:
                del out.metrics[:]
                out.metrics.extend(message.metrics)
            out.dataset_version = message.dataset_version or out.dataset_version
        return out

    def evaluate_stream(
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
    ) -> Iterator[common.StreamUpdate]:
        """Grade ``data`` (any iterable of dicts or Records, read lazily, or a path) as it is
        produced; yields results as they complete, and the metrics in the last update."""
        config = ev_pb.EvaluateStreamConfig(
            evaluators=evaluator_specs(evaluators, params),
            cluster_by=cluster_by or "",
            options=evaluate_options(bootstrap=bootstrap, seed=seed, concurrency=concurrency),
        )
        dataset = open_dataset(data, fields=fields, on_bad_record=on_bad_record)

        def messages() -> Iterator[ev_pb.EvaluateStreamRequest]:
            yield ev_pb.EvaluateStreamRequest(config=config)
            for batch in dataset.iter_batches(batch_size):
                yield ev_pb.EvaluateStreamRequest(records=[record_to_proto(r) for r in batch])

        stream = self._evaluation.evaluate_stream(messages(), headers=self.settings.headers)
        for message in self._stream(stream):
            yield common.stream_update(message)

    # -- RunService -----------------------------------------------------------------------------
    def create_run(
        self,
        spec: RunSpec | Mapping[str, Any] | str | os.PathLike[str],
        *,
        dry_run: bool = False,
        wait: bool = True,
        project_id: str = "",
        progress: Callable[[int, int], None] | None = None,
    ) -> RemoteRunResult:
        """Start an ``EvalRun`` on the server (the same file ``evalsi run -f`` reads).

        The spec is validated here first. A local dataset file is uploaded with the
        DatasetService and the spec sent with the server's path for it. With ``wait`` the call
        follows the run (``progress(tasks done, infra errors)``) and returns it finished.
        """
        loaded = load_spec(spec)
        local = local_dataset(loaded)
        server_path = self.upload_dataset(local).path if local is not None else None
        request = run_pb.CreateRunRequest(
            run=eval_run_proto(document_for_server(loaded, server_path)),
            project_id=project_id,
            dry_run=dry_run,
        )
        run = self._call(self._runs.create_run, request).run
        if dry_run or not wait:
            return self._result(run)
        return self.wait_run(run.id, progress=progress)

    def wait_run(
        self, run_id: str, *, progress: Callable[[int, int], None] | None = None
    ) -> RemoteRunResult:
        """Follow a run until it finishes; its final state."""
        for snapshot in self._watch(run_id):
            if progress is not None:
                progress(int(snapshot.progress.tasks_done), int(snapshot.progress.infra_errors))
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RemoteRunResult:
        """A run by id, unique prefix or ``latest``."""
        return self._result(self._call(self._runs.get_run, run_pb.GetRunRequest(id=run_id)).run)

    def run_info(self, run_id: str) -> RunInfo:
        """A run as ``evalsi runs show`` lists it (kind, name, times, spec, summary)."""
        return run_info(self._call(self._runs.get_run, run_pb.GetRunRequest(id=run_id)).run)

    def list_runs(self, *, limit: int = 20, kind: str = "", status: str = "") -> list[RunInfo]:
        """The newest runs first, at most ``limit``."""
        out: list[RunInfo] = []
        token = ""
        while len(out) < limit:
            request = run_pb.ListRunsRequest(
                page_size=min(limit - len(out), 1000), page_token=token, kind=kind, status=status
            )
            page = self._call(self._runs.list_runs, request)
            out.extend(run_info(r) for r in page.runs)
            token = page.next_page_token
            if not token or not page.runs:
                break
        return out[:limit]

    def watch_run(self, run_id: str) -> Iterator[RemoteRunResult]:
        """The run's state on every change, until it finishes."""
        for run in self._watch(run_id):
            yield self._result(run)

    def _watch(self, run_id: str) -> Iterator[run_pb.Run]:
        stream = self._runs.watch_run(
            run_pb.WatchRunRequest(id=run_id), headers=self.settings.headers
        )
        for message in self._stream(stream):
            yield message.run

    def cancel_run(self, run_id: str) -> RemoteRunResult:
        return self._result(
            self._call(self._runs.cancel_run, run_pb.CancelRunRequest(id=run_id)).run
        )

    def resume_run(
        self,
        run_id: str,
        *,
        wait: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> RemoteRunResult:
        """Complete a stopped, cancelled or interrupted run: only missing tasks run."""
        run = self._call(self._runs.resume_run, run_pb.ResumeRunRequest(id=run_id)).run
        return self.wait_run(run.id, progress=progress) if wait else self._result(run)

    def list_run_results(
        self, run_id: str, *, page_size: int = common.WATCH_PAGE
    ) -> Iterator[list[EvaluationResult]]:
        """A run's stored results, one page at a time."""
        token = ""
        while True:
            request = run_pb.ListRunResultsRequest(id=run_id, page_size=page_size, page_token=token)
            page = self._call(self._runs.list_run_results, request)
            yield [result_from_proto(r) for r in page.results]
            token = page.next_page_token
            if not token or not page.results:
                return

    def compare_runs(
        self,
        baseline: str,
        candidate: str,
        *,
        level: float = 0.95,
        seed: int = 0,
        metrics: Sequence[str] | None = None,
    ) -> Comparison:
        """Paired comparison of two runs on the server, as ``evalsi compare``."""
        request = run_pb.CompareRunsRequest(
            baseline=baseline, candidate=candidate, level=level, seed=seed
        )
        response = self._call(self._runs.compare_runs, request)
        return common.select_metrics(comparison_from_proto(response), metrics)

    def _result(self, run: run_pb.Run) -> RemoteRunResult:
        return remote_run_result(run_from_proto(run), self._pages)

    # -- CatalogService -------------------------------------------------------------------------
    def list_evaluators(self, *, pack: str = "") -> list[EvaluatorManifest]:
        response = self._call(
            self._catalog.list_evaluators, cat_pb.ListEvaluatorsRequest(pack=pack)
        )
        return common.manifests(response)

    def get_evaluator(self, ref: str) -> EvaluatorManifest:
        response = self._call(self._catalog.get_evaluator, cat_pb.GetEvaluatorRequest(ref=ref))
        return manifest_from_proto(response.evaluator)

    def list_packs(self) -> list[common.PackInfo]:
        response = self._call(self._catalog.list_packs, cat_pb.ListPacksRequest())
        return [common.pack_info(p) for p in response.packs]

    def list_connectors(self) -> list[common.ConnectorInfo]:
        response = self._call(self._catalog.list_connectors, cat_pb.ListConnectorsRequest())
        return [common.connector_info(c) for c in response.connectors]

    # -- DatasetService -------------------------------------------------------------------------
    def create_dataset(self, name: str, rows: Iterable[Mapping[str, Any]]) -> common.DatasetInfo:
        """Store rows as a new version of ``name`` (sent in chunks under the body cap)."""
        return self._send_rows(name, rows, base_version=None)

    def append_rows(
        self, name: str, rows: Iterable[Mapping[str, Any]], *, base_version: str = ""
    ) -> common.DatasetInfo:
        """Append rows to a version (the latest by default), giving a new version."""
        return self._send_rows(name, rows, base_version=base_version)

    def upload_dataset(self, path: str, *, name: str = "") -> common.DatasetInfo:
        """A local JSONL/JSON file as a server dataset; its ``path`` goes in a run spec."""
        return self._send_rows(name or dataset_name(path), raw_rows(path), base_version=None)

    def _send_rows(
        self, name: str, rows: Iterable[Mapping[str, Any]], *, base_version: str | None
    ) -> common.DatasetInfo:
        info: common.DatasetInfo | None = None
        for chunk in row_chunks((dict(r) for r in rows), self.max_request_bytes):
            if info is None and base_version is None:
                response: Any = self._call(
                    self._datasets.create_dataset, ds_pb.CreateDatasetRequest(name=name, rows=chunk)
                )
            else:
                base = info.version if info is not None else base_version or ""
                response = self._call(
                    self._datasets.append_rows,
                    ds_pb.AppendRowsRequest(name=name, base_version=base, rows=chunk),
                )
            info = common.dataset_info(response.dataset)
        if info is None:
            if base_version is None:
                response = self._call(
                    self._datasets.create_dataset, ds_pb.CreateDatasetRequest(name=name)
                )
                return common.dataset_info(response.dataset)
            return self.get_dataset(name, version=base_version).dataset
        return info

    def list_datasets(self) -> list[common.DatasetInfo]:
        response = self._call(self._datasets.list_datasets, ds_pb.ListDatasetsRequest())
        return [common.dataset_info(d) for d in response.datasets]

    def get_dataset(
        self, name: str, *, version: str = "", page_size: int = 0, page_token: str = ""
    ) -> common.DatasetPage:
        """One version (the latest by default) and up to ``page_size`` of its rows."""
        request = ds_pb.GetDatasetRequest(
            name=name, version=version, page_size=page_size, page_token=page_token
        )
        return common.dataset_page(self._call(self._datasets.get_dataset, request))

    def list_dataset_versions(self, name: str) -> list[common.DatasetInfo]:
        request = ds_pb.ListDatasetVersionsRequest(name=name)
        response = self._call(self._datasets.list_dataset_versions, request)
        return [common.dataset_info(d) for d in response.versions]
