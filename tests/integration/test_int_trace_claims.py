"""Trace claims and named leases on a real PostgreSQL (decision 0019): spans stored with
claims upsert their traces in the same transaction; traces are claimed once when due, even by
concurrent claimers; a lease is its holder's up to exactly its TTL and another's after."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from evalsi.core import Span, StoreError
from evalsi.store import (
    SqlStore,
    TraceStore,
    _owner,
    acquire_lease,
    claim_counts,
    claim_due,
    finish_claims,
    lease_holder,
    reap_claims,
    release_claims,
    release_lease,
)


@pytest.fixture
def store(pg_url: str) -> Iterator[SqlStore]:
    db = SqlStore.open(pg_url)
    yield db
    db.close()


def tid(i: int) -> str:
    return f"{i:032x}"


def spans(i: int, *, root: bool = True, children: int = 1) -> list[Span]:
    out = [
        Span(tid(i), f"{c + 2:016x}", parent_span_id="1" * 16, name="c") for c in range(children)
    ]
    if root:
        out.append(Span(tid(i), "1" * 16, name="root"))
    return out


def clock(db: SqlStore) -> float:
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        return float(conn.execute(sa.text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar())


def test_no_trace_no_claim(store: SqlStore) -> None:
    assert claim_due(store, 0.0, 0.0, 100) == []
    assert claim_due(store, 0.0, 0.0, 0) == []
    assert finish_claims(store, []) == 0
    assert release_claims(store, []) == 0
    assert claim_counts(store) == {"open": 0, "claimed": 0, "done": 0}


def test_spans_upsert_their_traces_and_are_claimed_once_due(store: SqlStore) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": spans(1) + spans(2, root=False)})
        traces.write({"p": spans(1, children=3)})  # more of trace 1, re-sent spans too
        assert claim_counts(store) == {"open": 2, "claimed": 0, "done": 0}
        now = clock(store)
        # not due: the root 10 s later, the orphan 60 s after its last span
        assert claim_due(store, 10.0, 60.0, 100, now=now) == []
        due = claim_due(store, 10.0, 60.0, 100, now=now + 10.5)
        assert [(p, t) for p, t, _ in due] == [("p", tid(1))]
        # claimed: not claimable again, even once everything is due
        again = claim_due(store, 10.0, 60.0, 100, now=now + 100)
        assert [(p, t) for p, t, _ in again] == [("p", tid(2))]
        assert claim_counts(store) == {"open": 0, "claimed": 2, "done": 0}
        assert finish_claims(store, [("p", tid(1)), ("p", tid(2))], now=now + 101) == 2
        assert claim_due(store, 0.0, 0.0, 100, now=now + 200) == []
        # a late span reopens a done trace: claimed again (the completer rebuilds its row)
        traces.write({"p": [Span(tid(1), "9" * 16, parent_span_id="1" * 16, name="late")]})
        late = claim_due(store, 10.0, 60.0, 100, now=clock(store) + 10.5)
        assert [(p, t) for p, t, _ in late] == [("p", tid(1))]
    finally:
        traces.close()


def test_a_deadline_reached_exactly_is_due(store: SqlStore) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": spans(1)})
    finally:
        traces.close()
    import sqlalchemy as sa

    with store.engine.begin() as conn:  # exact binary fractions: no rounding in the sums
        conn.execute(sa.text("UPDATE trace_claims SET root_at = 1000.0, last_at = 1000.0"))
    assert claim_due(store, 5.0, 60.0, 10, now=1004.9990234375) == []
    assert [t for _, t, _ in claim_due(store, 5.0, 60.0, 10, now=1005.0)] == [tid(1)]


def test_a_span_stored_after_the_claim_leaves_the_trace_open(store: SqlStore) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": spans(1)})
        [(_, _, claimed_at)] = claim_due(store, 0.0, 0.0, 10)
        # the completer read the trace before this span: finishing must not mark it done
        traces.write({"p": [Span(tid(1), "8" * 16, parent_span_id="1" * 16, name="late")]})
        assert finish_claims(store, [("p", tid(1))]) == 0
        assert claim_counts(store) == {"open": 1, "claimed": 0, "done": 0}
        assert claimed_at > 0
    finally:
        traces.close()


def test_concurrent_claimers_never_share_a_trace(store: SqlStore) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": [s for i in range(400) for s in spans(i)]})
    finally:
        traces.close()
    now = clock(store) + 1
    got: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def claimer(k: int) -> None:
        start.wait()
        while batch := claim_due(store, 0.0, 0.0, 7, now=now):
            got[k] += [t for _, t, _ in batch]

    threads = [threading.Thread(target=claimer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [t for part in got for t in part]
    assert len(every) == 400
    assert sorted(every) == sorted(tid(i) for i in range(400))
    assert sum(1 for part in got if part) >= 2  # they did run together


def test_claims_of_a_lost_holder_go_back_to_open(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": spans(1) + spans(2)})
    finally:
        traces.close()
    now = clock(store) + 1
    monkeypatch.setattr(_owner._Process, "token", "dead-holder")
    assert len(claim_due(store, 0.0, 0.0, 10, now=now)) == 2
    monkeypatch.setattr(_owner._Process, "token", "new-holder")
    assert claim_due(store, 0.0, 0.0, 10, now=now) == []
    assert finish_claims(store, [("p", tid(1))]) == 0  # not ours
    assert release_claims(store) == 2  # every other process's claim
    assert len(claim_due(store, 0.0, 0.0, 10, now=now)) == 2
    assert release_claims(store, [("p", tid(2))]) == 1  # ours, given back
    assert finish_claims(store, [("p", tid(1))]) == 1


def test_done_rows_are_reaped_after_an_hour(store: SqlStore) -> None:
    traces = TraceStore(store, claims=True)
    try:
        traces.write({"p": spans(1) + spans(2)})
    finally:
        traces.close()
    now = clock(store) + 1
    claim_due(store, 0.0, 0.0, 10, now=now)
    finish_claims(store, [("p", tid(1))], now=now)
    assert reap_claims(store, now=now + 3600) == 0  # exactly an hour: kept
    assert reap_claims(store, now=now + 3601) == 1
    assert claim_counts(store) == {"open": 0, "claimed": 1, "done": 0}


def test_claims_need_postgresql(tmp_path: object) -> None:
    db = SqlStore.open(":memory:")
    try:
        with pytest.raises(StoreError, match="need PostgreSQL"):
            TraceStore(db, claims=True)
        with pytest.raises(StoreError, match="need PostgreSQL"):
            claim_due(db, 1.0, 1.0, 1)
    finally:
        db.close()


def test_a_lease_is_its_holders_up_to_exactly_its_ttl(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_owner._Process, "token", "replica-a")
    a = acquire_lease(store, "watch", 3.0, now=1000.0)
    assert a is not None
    assert a.ours
    assert a.acquired_at == 1000.0
    renewed = acquire_lease(store, "watch", 3.0, now=1001.0)
    assert renewed is not None
    assert renewed.acquired_at == 1000.0
    assert renewed.heartbeat_at == 1001.0
    monkeypatch.setattr(_owner._Process, "token", "replica-b")
    assert acquire_lease(store, "watch", 3.0, now=1002.0) is None  # a's heartbeat is fresh
    assert acquire_lease(store, "watch", 3.0, now=1004.0) is None  # exactly the TTL: still a's
    holder = lease_holder(store, "watch")
    assert holder is not None
    assert holder.owner == "replica-a"
    assert not holder.ours
    b = acquire_lease(store, "watch", 3.0, now=1004.0009765625)  # past it: b's now
    assert b is not None
    assert b.ours
    assert b.acquired_at == 1004.0009765625
    monkeypatch.setattr(_owner._Process, "token", "replica-a")
    assert acquire_lease(store, "watch", 3.0, now=1004.5) is None  # a lost it
    assert not release_lease(store, "watch")  # not a's to give
    monkeypatch.setattr(_owner._Process, "token", "replica-b")
    assert release_lease(store, "watch")
    assert lease_holder(store, "watch") is None
    with pytest.raises(ValueError, match="positive TTL"):
        acquire_lease(store, "watch", 0)


def test_two_processes_racing_for_a_free_lease_one_wins(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    results: dict[str, object] = {}
    start = threading.Barrier(8)

    def take(k: int) -> None:
        start.wait()
        # tokens are per process: these threads stand in for processes through the holder row
        results[f"t{k}"] = acquire_lease(store, f"race-{k % 1}", 30.0)

    threads = [threading.Thread(target=take, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # one token in this process: every thread renews the same holder, none errs
    assert all(r is not None for r in results.values())
