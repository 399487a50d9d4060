"""``evalsi.Client``: every RPC of ``evalsi serve`` from Python, returning the embedded API's
result types (``ScoreResult``, ``RunResult``, ``Comparison``, ``EvaluatorManifest``).

Each call is written once, in ``AsyncClient``. ``Client`` runs it on a private event loop in a
daemon thread (``LoopThread``, started on first use, stopped by ``close()``) and blocks until it
returns. Chosen over two transports sharing pure helpers because the calls that make several
requests (a large ``evaluate`` streamed, chunked uploads, paging, ``create_run`` then
``wait_run``) would still keep their control flow twice, once with ``await`` and once without;
here each method is one line naming its coroutine, and even the signatures exist once. The
caller sees the coroutine's own behaviour: results and exceptions unchanged, iterators one item
per step (a streamed upload reads its input as it is sent), Ctrl-C cancels the call, and a
``Client`` works where a loop already runs (Jupyter) and from its own progress callbacks.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from evalsi.client._aclient import AsyncClient
from evalsi.client._bridge import LoopThread
from evalsi.client._common import DEFAULT_TIMEOUT
from evalsi.client._requests import DEFAULT_MAX_REQUEST_BYTES
from evalsi.core import EvaluationResult

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]], doc: str | None = None
) -> Callable[Concatenate[Client, P], T]:
    """``AsyncClient.method`` as a ``Client`` method that blocks until the coroutine is done."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._loop.run(method(self._async, *args, **kwargs))

    return _like(call, method, doc)


def _iterating(
    method: Callable[Concatenate[AsyncClient, P], AsyncIterator[T]], doc: str | None = None
) -> Callable[Concatenate[Client, P], Iterator[T]]:
    """``AsyncClient.method`` as a ``Client`` method returning a blocking iterator."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._loop.iterate(method(self._async, *args, **kwargs))

    return _like(call, method, doc)


def _like(call: F, method: Callable[..., Any], doc: str | None) -> F:
    """``call`` with ``method``'s name and signature (``help``, IDEs) and its own docstring."""
    functools.update_wrapper(call, method)
    signature = inspect.signature(method)
    returns = str(signature.return_annotation).replace("AsyncIterator[", "Iterator[")
    call.__annotations__ = {**method.__annotations__, "return": returns}
    call.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
    call.__qualname__ = f"Client.{method.__name__}"
    call.__module__ = __name__
    call.__doc__ = doc
    return call


class Client:
    """A connection to an ``evalsi serve`` server.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8080``.
        protocol: ``"connect"`` (HTTP/1.1, the default), ``"grpc"`` (HTTP/2) or ``"grpc-web"``.
        timeout: seconds each unary call may take (streams such as ``watch_run`` have none).
        headers: sent with every call (e.g. an authorization header).
        max_request_bytes: requests are split below this size (the server caps bodies).
        token: an OIDC access token sent as ``Authorization: Bearer``; default
            ``EVALSI_TOKEN`` from the environment.
        api_key: an API key (``evk_...``) sent the same way; default ``EVALSI_API_KEY``.
            Without either, the token ``evalsi login`` kept for ``url`` is sent.
        project: the project of every call that names none (``project_id=""``); default
            ``EVALSI_PROJECT``, else the server's ``default``.

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
        timeout: float | None = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        token: str | None = None,
        api_key: str | None = None,
        project: str | None = None,
    ) -> None:
        self._async = AsyncClient(
            url,
            protocol=protocol,
            timeout=timeout,
            headers=headers,
            max_request_bytes=max_request_bytes,
            token=token,
            api_key=api_key,
            project=project,
        )
        self._async._pages = self._pages  # results page through this client, as before close()
        self.settings = self._async.settings
        self.url = self.settings.url
        self.max_request_bytes = max_request_bytes
        self._loop = LoopThread(f"evalsi-client {self.url}")
        # An unclosed client's thread ends with it (the loop holds no reference to the client).
        weakref.finalize(self, self._loop.stop).atexit = False
        self._aio: AsyncClient | None = None
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        self._closed = True
        try:
            self._loop.run(self._async.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def aio(self) -> AsyncClient:
        """An ``AsyncClient`` with the same settings (created on first use)."""
        if self._aio is None:
            self._aio = self._async._twin()
        return self._aio

    def __repr__(self) -> str:
        return f"<evalsi.Client {self.url} ({self.settings.protocol})>"

    def _pages(self, run_id: str, project_id: str = "") -> Iterator[EvaluationResult]:
        if self._closed:  # a result read after close() (the CLI prints after its `with`)
            yield from self._async._sync_pages(run_id, project_id)
            return
        for page in self.list_run_results(run_id, project_id=project_id):
            yield from page

    # -- EvaluationService ----------------------------------------------------------------------
    evaluate = _blocking(
        AsyncClient.evaluate,
        """Grade records on the server; the arguments are ``evalsi.evaluate``'s.

        ``data`` is read here (a path, an ``hf://`` URI from the local cache, dicts or
        ``Record``s) and sent with the request; ``name`` names the run the server stores, and
        the server evaluates the gates. ``results`` holds every result without a local store.
        """,
    )
    evaluate_stream = _iterating(
        AsyncClient.evaluate_stream,
        """Grade ``data`` (any iterable of dicts or Records, read lazily, or a path) as it is
        produced; yields results as they complete, and the metrics in the last update.""",
    )

    # -- RunService -----------------------------------------------------------------------------
    create_run = _blocking(
        AsyncClient.create_run,
        """Start an ``EvalRun`` on the server (the same file ``evalsi run -f`` reads).

        The spec is validated here first. A local dataset file is uploaded with the
        DatasetService and the spec sent with the server's path for it. With ``wait`` the call
        follows the run (``progress(tasks done, infra errors)``) and returns it finished.
        """,
    )
    wait_run = _blocking(
        AsyncClient.wait_run, """Follow a run until it finishes; its final state."""
    )
    get_run = _blocking(AsyncClient.get_run, """A run by id, unique prefix or ``latest``.""")
    run_info = _blocking(
        AsyncClient.run_info,
        """A run as ``evalsi runs show`` lists it (kind, name, times, spec, summary).""",
    )
    list_runs = _blocking(AsyncClient.list_runs, """The newest runs first, at most ``limit``.""")
    watch_run = _iterating(
        AsyncClient.watch_run, """The run's state on every change, until it finishes."""
    )
    cancel_run = _blocking(AsyncClient.cancel_run)
    resume_run = _blocking(
        AsyncClient.resume_run,
        """Complete a stopped, cancelled or interrupted run: only missing tasks run.""",
    )
    replay_run = _blocking(
        AsyncClient.replay_run,
        """Replay an agent run from its cassettes as a new run (``evalsi replay``).""",
    )
    promote = _blocking(
        AsyncClient.promote,
        """Append a run's failing tasks or the project's flagged traces to a dataset
        (``evalsi promote --server``).""",
    )
    shadow = _blocking(
        AsyncClient.shadow,
        """Replay promoted rows against a candidate spec on the server and compare them with
        the recorded behaviour, paired by row id (``evalsi shadow --server``).""",
    )
    list_run_results = _iterating(
        AsyncClient.list_run_results, """A run's stored results, one page at a time."""
    )
    list_run_tasks = _iterating(
        AsyncClient.list_run_tasks,
        """A run's tasks (sample x trial), one page at a time, as ``evalsi runs show --tasks``
        lists them: output, each evaluator's verdict and, for an agent, the trajectory.""",
    )
    run_categories = _blocking(AsyncClient.run_categories)
    export_bundle = _blocking(AsyncClient.export_bundle)
    export_review = _blocking(AsyncClient.export_review)
    import_review = _blocking(AsyncClient.import_review)
    list_reviews = _blocking(AsyncClient.list_reviews)
    compare_runs = _blocking(
        AsyncClient.compare_runs,
        """Paired comparison of two runs on the server, as ``evalsi compare`` (``metrics``
        selects metrics there: a metric, an evaluator, or EVALUATOR/METRIC).""",
    )

    # -- CatalogService -------------------------------------------------------------------------
    list_evaluators = _blocking(AsyncClient.list_evaluators)
    get_evaluator = _blocking(AsyncClient.get_evaluator)
    list_packs = _blocking(AsyncClient.list_packs)
    list_connectors = _blocking(AsyncClient.list_connectors)

    # -- DatasetService -------------------------------------------------------------------------
    create_dataset = _blocking(
        AsyncClient.create_dataset,
        """Store rows as a new version of ``name`` (sent in chunks under the body cap).""",
    )
    append_rows = _blocking(
        AsyncClient.append_rows,
        """Append rows to a version (the latest by default), giving a new version.""",
    )
    upload_dataset = _blocking(
        AsyncClient.upload_dataset,
        """A local JSONL/JSON file as a server dataset; its ``path`` goes in a run spec.""",
    )
    list_datasets = _blocking(AsyncClient.list_datasets)
    get_dataset = _blocking(
        AsyncClient.get_dataset,
        """One version (the latest by default) and up to ``page_size`` of its rows.""",
    )
    list_dataset_versions = _blocking(AsyncClient.list_dataset_versions)

    # -- TraceService -------------------------------------------------------------------------
    list_traces = _blocking(
        AsyncClient.list_traces,
        """Assembled traces, newest first, at most ``limit`` (``since``/``until`` in unix
        seconds bound the start time; ``attributes`` match any span's attribute as text).""",
    )
    get_trace = _blocking(
        AsyncClient.get_trace,
        """One trace: its spans, feedback and (once assembled) its summary and record.""",
    )
    list_sessions = _blocking(
        AsyncClient.list_sessions, """Sessions, the most recently active first."""
    )
    list_spans = _blocking(AsyncClient.list_spans, """Spans, newest first, at most ``limit``.""")
    post_feedback = _blocking(
        AsyncClient.post_feedback,
        """Join a thumbs up/down, a label or a score to a trace or a session; returns it as
        stored.""",
    )

    # -- PolicyService ------------------------------------------------------------------------
    apply_policy = _blocking(
        AsyncClient.apply_policy,
        """Create or replace an OnlineEvalPolicy (a YAML file, YAML text or a parsed spec).""",
    )
    list_policies = _blocking(AsyncClient.list_policies)
    get_policy = _blocking(AsyncClient.get_policy)
    delete_policy = _blocking(AsyncClient.delete_policy)
    policy_stats = _blocking(
        AsyncClient.policy_stats,
        """Sampled / evaluated / skipped / errors and the window aggregates of a policy.""",
    )

    # -- IngestService ------------------------------------------------------------------------
    ingest = _blocking(
        AsyncClient.ingest,
        """Store verdicts computed elsewhere as a Score run on the server; its result.

        ``data`` is a JSONL file (one record a line with its ``results``), dicts of that
        shape, or ``(Record, [EvaluationResult])`` pairs; ``evaluators`` names or declares
        (``{name, ref, version, description, outputs}``) the evaluators the results name (any
        not given is declared by its name). ``client_key`` names the ingest: sent again, the
        same key finds the same run and stores nothing twice (default: a new key per call).
        Up to 200 records and 1 MiB go in one call, more in chunks; each call is retried on
        429, 5xx and lost connections (``retry``; waits on ``clock``).
        """,
    )

    # -- AuthService --------------------------------------------------------------------------
    whoami = _blocking(
        AsyncClient.whoami,
        """Who the server takes this client's credential for, and its roles per project.""",
    )
    list_projects = _blocking(AsyncClient.list_projects)
    create_project = _blocking(AsyncClient.create_project)
    create_api_key = _blocking(
        AsyncClient.create_api_key,
        """A new API key of a project with a role: ``(key, record)``; the key is shown once
        (the server keeps only its hash).""",
    )
    list_api_keys = _blocking(AsyncClient.list_api_keys)
    revoke_api_key = _blocking(AsyncClient.revoke_api_key)
    create_role_binding = _blocking(AsyncClient.create_role_binding)
    list_role_bindings = _blocking(AsyncClient.list_role_bindings)
    delete_role_binding = _blocking(AsyncClient.delete_role_binding)
    list_audit_events = _iterating(
        AsyncClient.list_audit_events, """Audit events, newest first, read page by page."""
    )
