"""Two policy engines on one store, as two server replicas (decision 0019): ``sync`` takes the
policies another applied, replaced or deleted, without writing their runs again; only the
leader keeps counts; a follower shows the leader's kept counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsi.core import RunStatus
from evalsi.evaluators import Registry
from evalsi.packs import builtin_registry
from evalsi.policies._engine import PolicyEngine
from evalsi.policies._spec import policy_from_yaml
from evalsi.store import SqlStore
from tests.unit.policies.test_engine import HEAD, cheap, make, steps

V1 = HEAD + "  cascade: [{ref: test/cheap}]\n"
V2 = HEAD + "  cascade: [{ref: test/cheap}, {ref: test/steps}]\n"


@pytest.fixture
def registry() -> Registry:
    r = builtin_registry()
    for ev in (cheap, steps):
        r.register(ev)
    return r


def test_a_follower_takes_what_the_leader_applies_replaces_and_deletes(
    tmp_path: Path, registry: Registry
) -> None:
    async def main() -> None:
        store = SqlStore.open(tmp_path / "s.db")
        leader = PolicyEngine(registry=registry, store=store)
        follower = PolicyEngine(registry=registry, store=store)
        follower.leader = False
        try:
            assert await follower.sync() == 0  # nothing kept: nothing to take
            first = await leader.apply(policy_from_yaml(V1, registry=registry))
            assert await follower.sync(counts=True) == 1
            [taken] = follower.policies()
            assert taken.run_id == first.run_id
            assert await follower.sync() == 0  # taken once

            trace, record = make(1, "ok")
            await leader.on_trace(trace, record)
            await leader._persist()
            await follower.sync(counts=True)
            stats = follower.stats("p")
            assert (stats.selected, stats.evaluated) == (1, 1)  # the leader's, from the store

            second = await leader.apply(policy_from_yaml(V2, registry=registry))
            ended = store.get_run(first.run_id)
            assert ended.status == RunStatus.STOPPED
            ended_at = ended.finished_at
            assert await follower.sync() == 1
            [taken] = follower.policies()
            assert taken.run_id == second.run_id
            # the follower did not end the replaced run again
            assert store.get_run(first.run_id).finished_at == ended_at

            await follower._persist()  # a follower keeps nothing
            assert (store.get_run(second.run_id).summary or {}).get("policy_state") is None

            await leader.delete("p")
            assert store.get_run(second.run_id).status == RunStatus.CANCELLED
            assert await follower.sync() == 1
            assert follower.policies() == []
        finally:
            await follower.close()
            await leader.close()
            store.close()

    asyncio.run(main())


def test_a_new_leader_takes_over_the_runs_of_a_replica_gone(
    tmp_path: Path, registry: Registry
) -> None:
    async def main() -> None:
        store = SqlStore.open(tmp_path / "s.db")
        engine = PolicyEngine(registry=registry, store=store)
        try:
            applied = await engine.apply(policy_from_yaml(V1, registry=registry))
            # its owner gone (a replica killed): the run reads interrupted
            import sqlalchemy as sa

            with store.engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE runs SET pid = 999999999, owner = 'gone' WHERE id = :id"),
                    {"id": applied.run_id},
                )
            assert store.get_run(applied.run_id).status == RunStatus.INTERRUPTED
            await engine.sync()
            assert store.get_run(applied.run_id).status == RunStatus.RUNNING  # ours now
        finally:
            await engine.close()
            store.close()

    asyncio.run(main())


def test_a_policy_deleted_on_a_follower_keeps_the_leaders_counts(
    tmp_path: Path, registry: Registry
) -> None:
    async def main() -> None:
        store = SqlStore.open(tmp_path / "s.db")
        leader = PolicyEngine(registry=registry, store=store)
        follower = PolicyEngine(registry=registry, store=store)
        follower.leader = False
        try:
            applied = await follower.apply(policy_from_yaml(V1, registry=registry))
            assert await leader.sync() == 1
            for i in range(3):
                await leader.on_trace(*make(i, "ok"))
            await follower.delete("p")  # its counts: none
            assert await leader.sync() == 1
            assert leader.policies() == []
            ended = store.get_run(applied.run_id)
            assert ended.status == RunStatus.CANCELLED
            counts = (ended.summary or {})["policy_state"]["counts"]
            assert counts["evaluated"] == 3  # the leader's, not the follower's zero
        finally:
            await follower.close()
            await leader.close()
            store.close()

    asyncio.run(main())
