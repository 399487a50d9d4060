"""Promotion calls for ``AsyncClient`` (a mixin, as ``_agents`` is): a run's failing tasks or
the project's flagged traces appended to a server dataset, as ``evalsi promote --server`` does,
and ``shadow``: promoted rows replayed against a candidate on the server.

``AsyncPromotionMixin`` needs what ``AsyncClient`` has: ``_call``, ``url``, ``settings`` and
its HTTP ``_transport``; its ``PromotionServiceClient`` is built on first use.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyqwest import Client as HTTPClient

from evalsi._proto.evalsi.v1alpha1 import promotion_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.promotion_service_connect import PromotionServiceClient
from evalsi.client._specs import dataset_name, document_for_server, eval_run_proto, load_spec
from evalsi.core import UserError
from evalsi.datasets import FieldMap
from evalsi.runs import RunSpec, ShadowResult, candidate_inputs, candidate_spec, check_rows


class AsyncPromotionMixin:
    """``promote``."""

    _call: Callable[..., Any]
    url: str
    settings: Any
    _transport: Any
    _promotion: PromotionServiceClient | None = None

    def _promotion_client(self) -> PromotionServiceClient:
        if self._promotion is None:
            self._promotion = PromotionServiceClient(
                self.url,
                protocol=self.settings.protocol_type,
                http_client=HTTPClient(self._transport),
                send_compression=None,
            )
        return self._promotion

    async def promote(
        self,
        dataset: str,
        *,
        run_id: str = "",
        traces: bool = False,
        failing_only: bool = False,
        negative_feedback: bool = False,
        evaluators: Sequence[str] = (),
        first_trial_only: bool = False,
        since: float | None = None,
        until: float | None = None,
        service: str = "",
        limit: int = 0,
        project_id: str = "",
    ) -> dict[str, Any]:
        """Append run ``run_id``'s tasks (or, with ``traces``, the project's traces between
        ``since`` and ``until``, unix seconds) to ``dataset``: only failing ones with
        ``failing_only``, traces with negative feedback with ``negative_feedback``. Returns
        ``{dataset, version, path, rows_added, rows_skipped, scanned}``."""
        request = pb.PromoteRequest(
            project_id=project_id,
            dataset=dataset,
            failing_only=failing_only,
            evaluators=list(evaluators),
            first_trial_only=first_trial_only,
            limit=limit,
        )
        if traces:
            request.traces.negative_feedback = negative_feedback
            request.traces.service = service
            if since is not None:
                request.traces.start_time.FromNanoseconds(round(since * 1e9))
            if until is not None:
                request.traces.end_time.FromNanoseconds(round(until * 1e9))
        elif run_id:
            request.run_id = run_id
        response = await self._call(self._promotion_client().promote, request)
        return {
            "dataset": response.dataset,
            "version": response.version,
            "path": response.path,
            "rows_added": response.rows_added,
            "rows_skipped": response.rows_skipped,
            "scanned": response.scanned,
        }

    async def shadow(
        self,
        spec: RunSpec | Mapping[str, Any] | str | os.PathLike[str],
        rows: str | os.PathLike[str],
        *,
        evaluators: Sequence[str] | None = None,
        level: float = 0.95,
        seed: int = 0,
        project_id: str = "",
    ) -> ShadowResult:
        """``evalsi shadow`` on the server: the candidate spec's target run on the rows' inputs
        (uploaded as the dataset ``<rows name>.inputs`` of the project, their recorded
        output, trajectory and usage left out), the rows' recorded behaviour graded by an
        Evaluate call with the same evaluators, and the two runs compared there, paired by row
        id (``compare_runs``).

        Args:
            spec: the candidate's ``EvalRun`` (a path, a document, or a ``RunSpec`` from YAML).
            rows: a local JSONL file of promoted rows (``evalsi promote``).
            evaluators: compare on these only (instance names or refs; default the spec's).
            level, seed: the comparison's confidence level and bootstrap seed.
            project_id: the project both runs go to (default: the client's).

        Raises:
            UserError: no rows, a repeated row id, a level outside (0, 1), no evaluators.
        """
        client: Any = self  # a mixin of AsyncClient: its calls are there
        if not 0.0 < level < 1.0:
            raise UserError(f"the confidence level must be strictly between 0 and 1, got {level}")
        path = os.fspath(rows)
        count = check_rows(path)
        loaded = load_spec(spec)
        with tempfile.TemporaryDirectory(prefix="evalsi-shadow-") as folder:
            inputs = candidate_inputs(path, folder)
            uploaded = await client.upload_dataset(
                inputs, name=f"{dataset_name(path)}.inputs", project_id=project_id
            )
        candidate = candidate_spec(loaded, inputs, evaluators)
        request = run_pb.CreateRunRequest(
            run=eval_run_proto(document_for_server(candidate, uploaded.path)),
            project_id=project_id,
        )
        created = (await client._call(client._runs.create_run, request)).run
        recorded = await client.evaluate(
            path,
            [e.as_mapping() for e in candidate.evaluators],
            fields=FieldMap(),
            seed=seed,
            name=f"{loaded.name} (recorded)",
            project_id=project_id,
        )
        result = await client.wait_run(created.id, project_id=project_id)
        comparison = await client.compare_runs(
            recorded.run_id, result.run_id, level=level, seed=seed, project_id=project_id
        )
        return ShadowResult.of(recorded.run_id, count, comparison, result)


__all__ = ["AsyncPromotionMixin"]
