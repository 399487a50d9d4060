"""Agent-run calls for ``AsyncClient`` (a mixin, as ``_datasets`` is for the DatasetService):
replaying a recorded agent run from its cassettes.

``AsyncAgentMixin`` needs what ``AsyncClient`` has: ``_call``, the ``RunServiceClient`` it
builds as ``_runs``, ``wait_run`` and ``_result``. ``project_id=""`` means the client's project.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClient
from evalsi.client._results import RemoteRunResult
from evalsi.wire import struct_to_proto


class AsyncAgentMixin:
    """``replay_run``."""

    _call: Callable[..., Any]
    _runs: RunServiceClient
    wait_run: Callable[..., Any]
    _result: Callable[..., RemoteRunResult]

    async def replay_run(
        self,
        run_id: str,
        *,
        evaluators: Sequence[str] | None = None,
        params: Mapping[str, Mapping[str, Any]] | None = None,
        gates: Sequence[str] | None = None,
        branch_from_step: int | None = None,
        wait: bool = True,
        progress: Callable[[int, int], None] | None = None,
        project_id: str = "",
    ) -> RemoteRunResult:
        """Replay agent run ``run_id`` from its cassettes as a new run on the server, as
        ``evalsi replay`` does: no model or tool call, or live after ``branch_from_step`` calls
        of each task; graded by ``evaluators`` (with ``params`` and ``gates``) when given."""
        request = run_pb.ReplayRunRequest(
            id=run_id,
            project_id=project_id,
            evaluators=list(evaluators or ()),
            gates=list(gates or ()),
        )
        if params:
            request.params.CopyFrom(struct_to_proto({k: dict(v) for k, v in params.items()}))
        if branch_from_step is not None:
            request.branch_from_step = branch_from_step
        response = await self._call(self._runs.replay_run, request)
        if wait:
            result: RemoteRunResult = await self.wait_run(
                response.run.id, progress=progress, project_id=project_id
            )
            return result
        return self._result(response.run, project_id)
