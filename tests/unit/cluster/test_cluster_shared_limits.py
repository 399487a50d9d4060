"""The store's shared spend and rate windows (schema 12), on SQLite and on a real PostgreSQL,
and the shared rate limiter over them: a window never takes more than its cap however many
takers race for it, a spender's totals are set (not added), and the limiter's windows turn
the per-minute figure into whole requests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.cluster._shared import RunSpend, StoreWindows, session_of
from evalsi.connectors import RateLimiterRegistry, RateLimits, SharedRateLimiter
from evalsi.core import NotFoundError, StoreError
from evalsi.runs import RunRow
from evalsi.specs import BudgetSpec
from evalsi.store import SqlStore, record_spend, session_spend, take_rate


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    url = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    store = SqlStore.open(url)
    try:
        yield store
    finally:
        store.close()


def a_run(db: SqlStore) -> str:
    row = RunRow(db, kind="run", spec={})
    return row.open()[1]


def take(db: SqlStore, slot: int = 7, *, requests: float = 1, tokens: float = 0,
         rcap: float | None = 10, tcap: float | None = None) -> bool:  # fmt: skip
    return take_rate(
        db, "k", slot, requests=requests, tokens=tokens, request_cap=rcap, token_cap=tcap
    )


def test_a_window_takes_up_to_its_cap_then_refuses(db: SqlStore) -> None:
    assert [take(db) for _ in range(12)] == [True] * 10 + [False] * 2
    assert take(db, slot=8)  # the next window is empty


def test_the_first_taker_of_a_window_always_fits(db: SqlStore) -> None:
    """A token estimate over the whole cap would otherwise never go."""
    assert take(db, rcap=None, tokens=5_000, tcap=1_000)
    assert not take(db, rcap=None, tokens=1, tcap=1_000)


def test_zero_caps_and_no_caps(db: SqlStore) -> None:
    assert all(take(db, slot=1, rcap=None) for _ in range(50))  # unlimited
    assert take(db, slot=2, rcap=0)  # the first still fits
    assert not take(db, slot=2, rcap=0)


def test_takers_racing_on_one_window_never_pass_its_cap(pg_url: str) -> None:
    """24 threads on PostgreSQL (SQLite has one writer at a time: no race to lose there)."""
    db = SqlStore.open(pg_url)
    won: list[bool] = []
    start = threading.Barrier(24)

    def taker() -> None:
        start.wait()
        won.append(take(db, slot=99, rcap=10))

    threads = [threading.Thread(target=taker) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db.close()
    assert sorted(won).count(True) == 10


def test_a_spenders_totals_are_set_not_added(db: SqlStore) -> None:
    run = a_run(db)
    for _ in range(3):  # the same write repeated (an answer lost): counted once
        record_spend(db, run, "s1", "w-a", tokens=100, usd=0.5, usd_unknown=1, calls=4)
    record_spend(db, run, "s1", "w-b", tokens=50, usd=0.25, usd_unknown=0, calls=2)
    record_spend(db, run, "s2", "w-a", tokens=999, usd=9.0, usd_unknown=0, calls=9)  # another
    assert session_spend(db, run, "s1") == (150, 0.75, 1, 6)
    assert session_spend(db, run, "nobody") == (0, 0.0, 0, 0)


def test_spend_of_an_unknown_run_is_a_clear_error(db: SqlStore) -> None:
    with pytest.raises(NotFoundError, match="no run 'run-nope'"):
        record_spend(db, "run-nope", "s", "w", tokens=1, usd=0.0, usd_unknown=0, calls=1)


def test_run_spend_sees_other_processes_and_its_own_live_shards(db: SqlStore) -> None:
    run = a_run(db)
    judges = [0, 0.0]
    ledger = RunSpend(
        db, run, "s1", BudgetSpec(tokens=1_000), lambda: (judges[0], judges[1]), "this-worker"
    )
    record_spend(db, run, "s1", "another-worker", tokens=400, usd=0.0, usd_unknown=0, calls=40)
    ledger.flush()
    one, two, three = ledger.start(), ledger.start(), ledger.start()
    ledger.end(three)  # equal to the others (all zero) yet not them: ended by identity
    one.tokens, two.tokens = 100, 200
    judges[0] = 50
    assert ledger.spent_elsewhere(one) == (400 + 200 + 50, 0.0)
    assert ledger.spent() is None  # 750 < 1000
    two.tokens = 500
    assert ledger.spent() == "budget(tokens): 1050 >= 1000"
    ledger.end(one)
    ledger.end(two)
    ledger.flush()
    assert session_spend(db, run, "s1")[0] == 400 + 600 + 50


def test_session_of_a_shard() -> None:
    assert session_of("ab12cd34-0") == "ab12cd34"
    assert session_of("ab12cd34-1017") == "ab12cd34"


class FakeWindows:
    def __init__(self) -> None:
        self.taken: dict[tuple[str, int], list[float]] = {}
        self.settled: list[tuple[str, int, float]] = []

    def take(self, key: str, slot: int, *, requests: float, tokens: float,
             request_cap: float | None, token_cap: float | None) -> bool:  # fmt: skip
        used = self.taken.setdefault((key, slot), [0.0, 0.0])
        fits = used == [0.0, 0.0] or (
            (request_cap is None or used[0] + requests <= request_cap)
            and (token_cap is None or used[1] + tokens <= token_cap)
        )
        if fits:
            used[0] += requests
            used[1] += tokens
        return fits

    def settle(self, key: str, slot: int, tokens: float) -> None:
        self.settled.append((key, slot, tokens))

    def prune(self, key: str, before_slot: int) -> None:
        pass


@pytest.mark.parametrize(
    ("rpm", "window_s", "cap"),
    [(6_000, 1.0, 100.0), (600, 1.0, 10.0), (90, 600 / 90, 10.0), (7, 60.0, 7.0), (1, 60.0, 1.0)],
)
def test_windows_hold_whole_requests(rpm: float, window_s: float, cap: float) -> None:
    limiter = SharedRateLimiter(RateLimits(requests_per_minute=rpm), FakeWindows(), "k")
    assert limiter.window_s == pytest.approx(window_s)
    assert limiter.request_cap == pytest.approx(cap)


def test_the_registry_scopes_shared_keys_by_run_and_never_holds_a_secret() -> None:
    windows = FakeWindows()
    registry = RateLimiterRegistry(windows=windows, scope="run-1")
    limiter = registry.get(("openai", "m", "env:KEY"), RateLimits(requests_per_minute=60))
    assert isinstance(limiter, SharedRateLimiter)
    assert limiter.key == "run-1|openai|m|env:KEY"
    assert registry.get(("openai", "m", "env:KEY"), None) is None


def test_a_full_window_waits_for_the_next_one() -> None:
    windows = FakeWindows()
    limiter = SharedRateLimiter(RateLimits(requests_per_minute=600), windows, "k")

    async def burst() -> list[float]:
        loop = asyncio.get_running_loop()
        began = loop.time()
        for _ in range(11):
            await limiter.acquire()
        return [loop.time() - began]

    [took] = asyncio.run(burst())
    assert 0.0 < took <= 1.1  # the eleventh waited for the next 1 s window
    assert sum(v[0] for v in windows.taken.values()) == 11


def test_settling_goes_to_the_current_window_in_the_background() -> None:
    windows = FakeWindows()
    limiter = SharedRateLimiter(RateLimits(tokens_per_minute=6_000), windows, "k")

    async def call() -> None:
        await limiter.acquire(tokens=100)
        limiter.settle(100, 160)
        limiter.settle(100, 100)  # exact: nothing to correct
        limiter.settle(100, None)  # unknown usage
        await asyncio.sleep(0.05)

    asyncio.run(call())
    assert [t for _, _, t in windows.settled] == [60.0]


def test_a_broken_store_is_a_store_error(tmp_path: Path) -> None:
    db = SqlStore.open(str(tmp_path / "s.db"))
    db.engine.dispose()
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE rate_windows")
    with pytest.raises(StoreError, match="rate limit"):
        take(db)
    StoreWindows(db)  # builds without touching the store
    db.close()
