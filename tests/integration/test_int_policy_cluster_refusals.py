"""With `cluster:` configured, a policy driven by late feedback is refused at ApplyPolicy with
an error naming the field (decision 0019: feedback is not handed across replicas yet); the same
policy without it, or on a server without `cluster:`, is applied."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as pb
from evalsi.cluster import ClusterConfig
from evalsi.core import UserError
from evalsi.server._policies import PolicyHandler
from tests.support.server_state import server_state

HEAD = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: fb}
spec:
  cascade: [{ref: contains, params: {values: [ok]}}]
"""
ON_FEEDBACK = HEAD + "  onFeedback: [{ref: length}]\n"
FORCED = HEAD + "  sampling: {rate: 0.1, always: [feedback.negative]}\n"


@pytest.mark.parametrize(
    ("text", "field"),
    [(ON_FEEDBACK, "spec.onFeedback"), (FORCED, "spec.sampling.always")],
)
def test_feedback_driven_policies_are_refused_with_cluster(
    tmp_path: Path, text: str, field: str
) -> None:
    state = server_state(tmp_path, runs=False, cluster=ClusterConfig(nats="nats://127.0.0.1:1"))
    handler = PolicyHandler(state)

    async def main() -> str:
        try:
            with pytest.raises(UserError, match=f"^{field}: .*cluster:") as e:
                await handler.apply_policy(pb.ApplyPolicyRequest(yaml=text), None)
            assert e.value.hint
            applied = await handler.apply_policy(pb.ApplyPolicyRequest(yaml=HEAD), None)
            return applied.policy.name
        finally:
            await handler.engine.close()

    try:
        assert asyncio.run(main()) == "fb"
    finally:
        state.store.close()


def test_the_same_policies_are_applied_without_cluster(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    handler = PolicyHandler(state)
    try:

        async def both() -> list[str]:
            names = []
            for text in (ON_FEEDBACK, FORCED):
                applied = await handler.apply_policy(pb.ApplyPolicyRequest(yaml=text), None)
                names.append(applied.policy.name)
            await handler.engine.close()
            return names

        assert asyncio.run(both()) == ["fb", "fb"]
    finally:
        state.store.close()
