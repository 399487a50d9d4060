"""Promotion calls for ``AsyncClient`` (a mixin, as ``_agents`` is): a run's failing tasks or
the project's flagged traces appended to a server dataset, as ``evalsi promote --server`` does.

``AsyncPromotionMixin`` needs what ``AsyncClient`` has: ``_call``, ``url``, ``settings`` and
its HTTP ``_transport``; its ``PromotionServiceClient`` is built on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyqwest import Client as HTTPClient

from evalsi._proto.evalsi.v1alpha1 import promotion_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.promotion_service_connect import PromotionServiceClient


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


__all__ = ["AsyncPromotionMixin"]
