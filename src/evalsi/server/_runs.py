"""RunService: the Run way in over the API. Runs are executed by the ``RunManager``
(``_run_manager``); this module turns requests into specs and runs into messages.

A CreateRun request carries the same ``EvalRun`` document ``evalsi run -f`` reads: it is turned
into its proto3 JSON form and validated by ``run_spec_from_dict``, exactly as the YAML is, so
an error names the same field either way. What a server must refuse on top: dataset paths
outside ``datasets_dir``, ``file:`` secret references (files on the server's disk) and, unless
``allow_python_targets``, Python targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from connectrpc.request import RequestContext

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.core import UserError
from evalsi.datasets import FieldMap, confine, open_dataset
from evalsi.evidence import MANIFEST as BUNDLE_MANIFEST
from evalsi.evidence import REQUIRED as BUNDLE_FILES
from evalsi.evidence import archive_bundle, write_bundle
from evalsi.runs import (
    DEFAULT_CATEGORY_KEY,
    RunResult,
    RunSpec,
    compare_runs,
    iter_tasks,
    run_categories,
    run_spec_from_dict,
)
from evalsi.server._guard import principal_id, readable_projects
from evalsi.server._run_checks import check_target, check_tools
from evalsi.server._run_manager import STATUSES, RunManager, RunSnapshot
from evalsi.server._state import Limits, ServerState
from evalsi.store import DEFAULT_PROJECT, RunInfo, SqlStore, check_project_id
from evalsi.wire import (
    category_to_proto,
    comparison_to_proto,
    message_document,
    result_to_proto,
    run_result_to_proto,
    run_to_proto,
    task_to_proto,
)

log = logging.getLogger("evalsi.server")

DEFAULT_PAGE = 20
MAX_PAGE = 1000
DEFAULT_RESULTS_PAGE = 1000
MAX_RESULTS_PAGE = 10_000
DEFAULT_TASKS_PAGE = 100
MAX_TASKS_PAGE = 1000  # a task carries its output and trajectory: pages stay small
SPEC_SOURCE = "<request>"


class RunHandler:
    """Implements the generated ``RunService`` protocol over ``state.runs``."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        if state.runs is None:
            state.runs = RunManager(state)

    @property
    def runs(self) -> RunManager:
        manager = self.state.runs
        assert isinstance(manager, RunManager)
        return manager

    # -- unary RPCs -------------------------------------------------------------------------
    async def create_run(
        self, request: pb.CreateRunRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.CreateRunResponse:
        if not request.HasField("run"):
            raise UserError("run: the EvalRun document is required")
        spec = self.spec_from_request(request.run, request.project_id)
        datasets = self.state.config.datasets_dir_of(request.project_id)
        await asyncio.to_thread(check_not_empty, spec, datasets)
        await asyncio.to_thread(check_task_limit, spec, self.state.config.limits)
        created = await self.runs.create(
            spec,
            project_id=request.project_id,
            dry_run=request.dry_run,
            created_by=principal_id(self.state),
        )
        return pb.CreateRunResponse(run=self._message(created))

    async def get_run(
        self, request: pb.GetRunRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.GetRunResponse:
        run = await self.runs.get(_ref(request.id), _project(request.project_id))
        return pb.GetRunResponse(run=self._message(run))

    async def list_runs(
        self, request: pb.ListRunsRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListRunsResponse:
        size = _page_size(request.page_size, DEFAULT_PAGE, MAX_PAGE)
        # One run more than the page tells whether another page follows (no empty last page).
        rows = await asyncio.to_thread(
            self._runs_page,
            size + 1,
            request.page_token,
            request.kind,
            request.status,
            request.project_id,
        )
        out = pb.ListRunsResponse()
        out.runs.extend(self._message(self.runs.snapshot(r)) for r in rows[:size])
        if len(rows) > size:
            out.next_page_token = rows[size - 1].id  # a cursor: stable while runs are added
        return out

    async def cancel_run(
        self, request: pb.CancelRunRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.CancelRunResponse:
        run = await self.runs.cancel(_ref(request.id), _project(request.project_id))
        return pb.CancelRunResponse(run=self._message(run))

    async def resume_run(
        self, request: pb.ResumeRunRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ResumeRunResponse:
        run = await self.runs.resume(_ref(request.id), _project(request.project_id))
        return pb.ResumeRunResponse(run=self._message(run))

    async def replay_run(
        self, request: pb.ReplayRunRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ReplayRunResponse:
        # Whitespace as the schema's pattern (ECMA-262 \s) counts it: a name the document
        # calls valid is never refused here as blank.
        evaluators = [str(e).strip(_SCHEMA_SPACE) for e in request.evaluators]
        for i, name in enumerate(evaluators):
            if not name or "\x00" in name:
                raise UserError(f"evaluators[{i}]: expected an evaluator name or ref")
        params = message_document(request.params) if request.HasField("params") else {}
        for name, value in params.items():
            if not isinstance(value, dict):
                raise UserError(f"params.{name}: expected an object of the evaluator's params")
        run = await self.runs.replay(
            _ref(request.id),
            _project(request.project_id),
            evaluators=evaluators or None,
            params=params,
            gates=list(request.gates) if request.gates else None,
            branch_from_step=(
                request.branch_from_step if request.HasField("branch_from_step") else None
            ),
            created_by=principal_id(self.state),
        )
        return pb.ReplayRunResponse(run=self._message(run))

    async def list_run_results(
        self, request: pb.ListRunResultsRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListRunResultsResponse:
        size = _page_size(request.page_size, DEFAULT_RESULTS_PAGE, MAX_RESULTS_PAGE)
        offset = _offset(request.page_token)
        ref, project = _ref(request.id), _project(request.project_id)
        return await asyncio.to_thread(self._results_page, ref, project, offset, size)

    async def list_run_tasks(
        self, request: pb.ListRunTasksRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.ListRunTasksResponse:
        size = _page_size(request.page_size, DEFAULT_TASKS_PAGE, MAX_TASKS_PAGE)
        offset = _offset(request.page_token)
        ref, project = _ref(request.id), _project(request.project_id)
        return await asyncio.to_thread(self._tasks_page, ref, project, offset, size)

    async def export_bundle(
        self, request: pb.ExportBundleRequest, ctx: RequestContext[Any, Any], /
    ) -> AsyncIterator[pb.ExportBundleResponse]:
        """The run's bundle, written to a private temporary directory by the same writer as
        ``evalsi bundle``, then streamed file by file (manifest.json last) and removed."""
        ref, project = _ref(request.id), _project(request.project_id)
        info: RunInfo = await asyncio.to_thread(self.state.store.get_run, ref, project_id=project)
        with tempfile.TemporaryDirectory(prefix="evalsi-bundle-") as tmp:
            where = Path(tmp) / "bundle"
            await asyncio.to_thread(write_bundle, self.state.store, info.id, where)
            objects = self.state.object_store()
            if objects is not None:  # archived where it outlives this replica (decision 0018)
                kept = await asyncio.to_thread(archive_bundle, where, info.id, objects)
                log.info("bundle of run %s archived as %s", info.id, kept.key)
            for name in (*BUNDLE_FILES, BUNDLE_MANIFEST):
                size = (where / name).stat().st_size
                with (where / name).open("rb") as f:
                    first = True
                    while True:
                        chunk = await asyncio.to_thread(f.read, BUNDLE_CHUNK)
                        if not chunk and not first:
                            break
                        yield pb.ExportBundleResponse(
                            path=name, data=chunk, size=size if first else 0, run_id=info.id
                        )
                        first = False
                        if len(chunk) < BUNDLE_CHUNK:
                            break

    async def get_run_categories(
        self, request: pb.GetRunCategoriesRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.GetRunCategoriesResponse:
        ref, project = _ref(request.id), _project(request.project_id)
        key = request.key or DEFAULT_CATEGORY_KEY
        _no_nul(key, "key")
        return await asyncio.to_thread(self._categories, ref, project, key)

    def _categories(self, ref: str, project: str, key: str) -> pb.GetRunCategoriesResponse:
        store = self.state.store
        info: RunInfo = store.get_run(ref, project_id=project)
        found = run_categories(store, info.id, key, registry=self.state.registry)
        return pb.GetRunCategoriesResponse(categories=[category_to_proto(c) for c in found])

    async def compare_runs(
        self, request: pb.CompareRunsRequest, ctx: RequestContext[Any, Any], /
    ) -> pb.CompareRunsResponse:
        level = request.level or 0.95
        if not 0.0 < level < 1.0:
            raise UserError(f"level: expected a confidence level in (0, 1), got {level}")
        project = _project(request.project_id)
        store = self.state.store
        # Both resolved within the project first; compare_runs then reads them by exact id.
        baseline = await asyncio.to_thread(
            store.get_run, _ref(request.baseline, "baseline"), project_id=project
        )
        candidate = await asyncio.to_thread(
            store.get_run, _ref(request.candidate, "candidate"), project_id=project
        )
        comparison = await asyncio.to_thread(
            compare_runs,
            store,
            baseline.id,
            candidate.id,
            metrics=_metric_filter(request.metrics),
            level=level,
            seed=request.seed if request.HasField("seed") else 0,
        )
        return comparison_to_proto(comparison)

    # -- streaming --------------------------------------------------------------------------
    async def watch_run(
        self, request: pb.WatchRunRequest, ctx: RequestContext[Any, Any], /
    ) -> AsyncIterator[pb.WatchRunResponse]:
        async for snapshot in self.runs.watch(_ref(request.id), _project(request.project_id)):
            yield pb.WatchRunResponse(run=self._message(snapshot))

    # -- specs ------------------------------------------------------------------------------
    def spec_from_request(self, run: Any, project: str = "") -> RunSpec:
        """The ``RunSpec`` of an ``EvalRun`` message, validated as its YAML would be."""
        doc = message_document(run)
        spec_doc = doc.get("spec")
        if isinstance(spec_doc, dict):
            target = spec_doc.get("target")
            if isinstance(target, dict) and "python" in target:
                check_target(
                    "python", self.state.config
                )  # before its module name is even looked at
            _check_secrets(spec_doc, self.state.config.allowed_env_secrets)
            dataset = spec_doc.get("dataset")
            if isinstance(dataset, dict) and isinstance(dataset.get("path"), str):
                dataset["path"] = self._dataset_path(dataset["path"], project)
        datasets = self.state.config.datasets_dir_of(project)
        spec = run_spec_from_dict(doc, source=SPEC_SOURCE, base_dir=datasets)
        check_target(spec.target.kind, self.state.config)
        check_tools(spec, self.state.config)
        check_limits(spec, self.state.config.limits)
        return spec

    def _dataset_path(self, path: str, project: str) -> str:
        if "://" in path:
            raise UserError(
                f"spec.dataset.path: {path!r}: a server reads datasets from its datasets_dir only",
                hint="upload the data with the DatasetService (evalsi.Client.create_dataset) "
                "and use the path it returns",
            )
        root = self.state.config.datasets_dir_of(project)
        resolved = confine(root, path, what="spec.dataset.path")
        # a version another replica stored: fetched from the object store on first use
        if not resolved.is_file() and not self.state.dataset_files(project).fetch_path(path):
            raise UserError(
                f"spec.dataset.path: no dataset {path!r} in the project's datasets",
                hint="upload it with the DatasetService, or list what the server holds",
            )
        return str(resolved)

    # -- messages ---------------------------------------------------------------------------
    def _message(self, item: RunSnapshot | RunResult) -> pb.Run:
        if isinstance(item, RunResult):
            return run_result_to_proto(item)
        return run_to_proto(
            item.info, status=item.status, progress=item.progress, metrics=item.metrics
        )

    def _runs_page(
        self, limit: int, token: str, kind: str, status: str, project_id: str
    ) -> list[RunInfo]:
        """Newest first, after the run ``token`` names (the last of the previous page)."""
        store = self.state.store
        for name, value in (("page_token", token), ("kind", kind)):
            _no_nul(value, name)
        if project_id:
            _project(project_id)
        if status and status not in STATUSES:
            raise UserError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        projects = None if project_id else readable_projects()
        if token and not _is_run(store, token, project_id or None, projects):
            raise _bad_token(token)
        return store.list_runs(
            limit,
            after=token or None,
            kind=kind or None,
            status=status or None,
            project_id=project_id or None,
            projects=projects,
        )

    def _results_page(
        self, ref: str, project: str, offset: int, size: int
    ) -> pb.ListRunResultsResponse:
        store = self.state.store
        info: RunInfo = store.get_run(ref, project_id=project)
        out = pb.ListRunResultsResponse()
        stream = store.iter_results(info.id, batch=min(size + 1, 5000))
        try:
            for i, (_seq, _index, result) in enumerate(stream):
                if i < offset:
                    continue
                if i >= offset + size:
                    out.next_page_token = str(offset + size)
                    break
                out.results.append(result_to_proto(result))
        finally:
            stream.close()  # type: ignore[attr-defined]
        return out

    def _tasks_page(
        self, ref: str, project: str, offset: int, size: int
    ) -> pb.ListRunTasksResponse:
        store = self.state.store
        info: RunInfo = store.get_run(ref, project_id=project)
        out = pb.ListRunTasksResponse()
        # One task more than the page tells whether another page follows.
        tasks = list(iter_tasks(store, info.id, size + 1, offset=offset))
        out.tasks.extend(task_to_proto(t) for t in tasks[:size])
        if len(tasks) > size:
            out.next_page_token = str(offset + size)
        return out


def over_limit(where: str, value: int, limit: int, key: str, unit: str = "") -> UserError:
    """The 400 for a request over one of the server's ``limits`` (named, with its key)."""
    return UserError(
        f"{where}: {value}{unit} is over this server's limit of {limit} (limits.{key} in its "
        "evalsi.yaml)",
        hint="ask for less, or ask the server's operator to raise the limit",
    )


def check_limits(spec: RunSpec, limits: Limits) -> None:
    """Trials and concurrency of ``spec`` within ``limits`` (samples x trials: see
    ``check_task_limit``, which reads the dataset)."""
    if spec.trials > limits.max_trials:
        raise over_limit("spec.trials", spec.trials, limits.max_trials, "maxTrials")
    concurrency = [("spec.maxConcurrency", spec.max_concurrency)]
    concurrency += [
        (f"spec.judges.{n}.maxConcurrency", j.max_concurrency) for n, j in spec.judges.items()
    ]
    for where, value in concurrency:
        if value > limits.max_concurrency:
            raise over_limit(where, value, limits.max_concurrency, "maxConcurrency")


def check_not_empty(spec: RunSpec, datasets_dir: Any) -> None:
    """A dataset with no record to send is refused when the run is created (400, as the CLI's
    exit 2), not accepted and then failed. Read only to the first record; rows that are bad
    are passed over here (whether they stop the run is the run's to say), so only data where
    no row at all could become a sample is refused."""
    dataset = open_dataset(
        spec.dataset.source, fields=FieldMap(**spec.dataset.fields), on_bad_record="skip"
    )
    batches = dataset.iter_batches(1)
    try:
        if next(batches, None) is not None:
            return
    finally:
        batches.close()
    error = dataset.nothing_read()
    why = error.message.removeprefix(f"{error.path}: ")
    where = spec.dataset.source
    # Named as the caller gave it, not by the server's own directory.
    with contextlib.suppress(ValueError):
        where = str(Path(where).relative_to(Path(datasets_dir).resolve()))
    raise UserError(
        f"spec.dataset.path: {where!r} has no record to run: {why}",
        hint="upload data with at least one record (DatasetService), or name another dataset",
    )


def check_task_limit(spec: RunSpec, limits: Limits) -> None:
    """Samples x trials within ``limits.max_tasks_per_run``. The dataset is counted only as
    far as the limit (a file in datasets_dir; an unreadable one is left for the run to
    report, as it would be without the limit)."""
    most = limits.max_tasks_per_run // max(spec.trials, 1)
    if spec.dataset.limit is not None and spec.dataset.limit <= most:
        return
    counted = 0
    try:
        dataset = open_dataset(spec.dataset.source, fields=FieldMap(**spec.dataset.fields))
        batches = dataset.iter_batches()
        try:
            for batch in batches:
                counted += len(batch)
                if counted > most:
                    break
        finally:
            batches.close()
    except UserError:
        return
    samples = counted if spec.dataset.limit is None else min(counted, spec.dataset.limit)
    if samples > most:  # counting stopped one past the limit: "at least"
        raise UserError(
            f"spec: at least {samples * spec.trials} tasks ({samples} samples or more x "
            f"{spec.trials} trials) is over this server's limit of {limits.max_tasks_per_run} "
            "tasks per run (limits.maxTasksPerRun in its evalsi.yaml)",
            hint="set spec.dataset.limit or fewer trials, or ask the server's operator to "
            "raise the limit",
        )


BUNDLE_CHUNK = 1 << 20
"""Bytes per ExportBundle message."""


def _ref(value: str, name: str = "id") -> str:
    if not value.strip():
        raise UserError(f"{name}: a run id is required (an id, a unique prefix, or latest)")
    _no_nul(value, name)
    return value


def _project(value: str) -> str:
    """A by-id read's project: runs of other projects are not found (404) until identity
    exists to say who may see what."""
    if not value:
        return DEFAULT_PROJECT
    try:
        return check_project_id(value)
    except UserError as e:
        raise UserError(f"project_id: {e.message}", hint=e.hint) from None


def _no_nul(value: str, name: str) -> None:
    """PostgreSQL text cannot hold NUL: refused here as bad input, on every backend alike."""
    if "\x00" in value:
        raise UserError(f"{name}: contains a NUL character")


def _page_size(value: int, default: int, largest: int) -> int:
    """As the OpenAPI document states it (0 to ``largest``): a larger page is refused, not
    cut, so a client is never told one thing and given another."""
    if not 0 <= value <= largest:
        raise UserError(f"page_size: expected 0 (the default, {default}) to {largest}, got {value}")
    return value or default


_OFFSET = re.compile(r"[0-9]{1,12}")


def _offset(token: str) -> int:
    if not token:
        return 0
    if not _OFFSET.fullmatch(token):
        raise _bad_token(token)
    return int(token)


def _bad_token(token: str) -> UserError:
    return UserError(
        f"page_token: {token[:40]!r} is not a token this server gave",
        hint="pass next_page_token from the previous page, or nothing for the first",
    )


def _is_run(
    store: SqlStore, run_id: str, project_id: str | None, projects: frozenset[str] | None
) -> bool:
    """Whether ``run_id`` is exactly the id of a stored run (no prefix, no ``latest``) the
    list may show: a run of a project outside it is no token, as an unknown id is not (else
    the answer would tell that the run exists)."""
    try:
        info = store.get_run(run_id, project_id=project_id)
    except UserError:  # no such run, or an ambiguous prefix
        return False
    return info.id == run_id and (projects is None or info.project_id in projects)


def _metric_filter(names: Sequence[str]) -> list[str] | None:
    """CompareRuns' ``metrics``: None compares every metric; an empty name is refused."""
    wanted = [str(n).strip() for n in names]
    if any(not n for n in wanted):
        raise UserError("metrics: a metric name is empty (expected EVALUATOR or EVALUATOR/METRIC)")
    return wanted or None


_SCHEMA_SPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What ECMA-262's ``\\s`` matches: the whitespace of the JSON Schema patterns in the proto."""


# The keys that hold a secret by reference: most sections' ``secretRef``; a Langfuse sink's
# ``secretKeyRef`` and a LangSmith sink's ``apiKeyRef``.
_SECRET_KEYS = frozenset({"secretRef", "secretKeyRef", "apiKeyRef"})


def _secret_refs(node: Any, where: str) -> list[tuple[str, str]]:
    """Every secret reference anywhere in a spec: each ``secretRef`` (a model's, a judge's, a
    connector's, a sink's; ``secretKeyRef`` and ``apiKeyRef`` for Langfuse and LangSmith), and
    each header value that is read from a reference (``secret:…`` on an HTTP target,
    ``env:``/``file:`` on the agent connectors). Walking the whole document keeps a new section
    from being forgotten here."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            at = f"{where}.{key}"
            if key in _SECRET_KEYS and isinstance(value, str):
                found.append((at, value))
            elif key == "headers" and isinstance(value, dict):
                for name, header in value.items():
                    if not isinstance(header, str):
                        continue
                    ref = header[len("secret:") :] if header.startswith("secret:") else header
                    if ref.startswith(("env:", "file:")):
                        found.append((f"{at}.{name}", ref))
            else:
                found.extend(_secret_refs(value, at))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found.extend(_secret_refs(item, f"{where}[{i}]"))
    return found


def _check_secrets(spec_doc: Mapping[str, Any], allowed_env: tuple[str, ...]) -> None:
    """Secret references a request may use: ``file:`` never (it would read a file on the
    server's disk), ``env:NAME`` only for names the server's ``secrets.allowEnv`` lists (else a
    caller could have any server variable sent to a URL of its choosing). A Bedrock model
    without a key signs with the server's own AWS credentials (and sends its session token to
    the model's address): that is lending them, allowed only when ``secrets.allowEnv`` lists
    ``AWS_SECRET_ACCESS_KEY``."""
    target = spec_doc.get("target")
    places: list[tuple[str, Any]] = []
    models: list[tuple[str, Any]] = []
    if isinstance(target, dict):
        agent = target.get("agent")
        user = agent.get("user") if isinstance(agent, dict) else None
        models = [
            ("spec.target.model", target.get("model")),
            ("spec.target.agent.model", agent.get("model") if isinstance(agent, dict) else None),
            ("spec.target.agent.user.model", user.get("model") if isinstance(user, dict) else None),
        ]
    judges = spec_doc.get("judges")
    if isinstance(judges, dict):
        models += [(f"spec.judges.{name}", judge) for name, judge in judges.items()]
    places.extend(_secret_refs(spec_doc, "spec"))
    for where, model in models:
        if not isinstance(model, dict):
            continue
        lent = "AWS_SECRET_ACCESS_KEY" in allowed_env
        if model.get("connector") == "bedrock" and not model.get("secretRef") and not lent:
            raise UserError(
                f"{where}: a bedrock model without a secretRef would sign with this server's "
                "AWS credentials, which it does not lend to runs",
                hint="give a Bedrock API key as secretRef (env:NAME, listed under "
                "secrets.allowEnv), or ask the operator to list AWS_SECRET_ACCESS_KEY there",
            )
    for where, ref in places:
        if not isinstance(ref, str):
            continue
        if ref.startswith("file:"):
            raise UserError(
                f"{where}: file: secret references are refused by a server (they would read "
                "a file on the server's disk)",
                hint="reference an environment variable the server allows (env:NAME, listed "
                "under secrets.allowEnv in its evalsi.yaml)",
            )
        if ref.startswith("env:") and ref[len("env:") :] not in allowed_env:
            allowed = ", ".join(allowed_env) or "none"
            raise UserError(
                f"{where}: {ref} is not a secret this server lends to runs (secrets.allowEnv "
                f"in its evalsi.yaml lists: {allowed})",
                hint="ask the server's operator to add the variable to secrets.allowEnv",
            )
