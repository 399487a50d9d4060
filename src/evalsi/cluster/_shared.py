"""A cluster run's budget and rate limits, held across its workers (store: ``_shared_limits``).

``RunSpend`` is one worker process's spend on one session of a run: the shards it is running
(their ``runs.Spend``, live), those it finished, and what its judges of the run used since the
session began. It writes its running totals to the store (``flush``: every ``FLUSH_S`` while
shards run, and when one ends) and reads back the session's sum, so each shard's budget check
sees what every worker spent — up to ``FLUSH_S`` late, which bounds the overshoot to what the
run's workers can spend in that time (embedded runs overshoot by their in-flight calls too).

``StoreWindows`` is ``connectors.RateWindows`` over the store: every worker's calls on a key
take from the same windows, so the spec's per-minute limits hold for the run as a whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from evalsi.runs import Spend, over_budget
from evalsi.specs import BudgetSpec
from evalsi.store import (
    SqlStore,
    prune_rate,
    record_spend,
    session_spend,
    settle_rate,
    take_rate,
)

FLUSH_S = 0.2
"""How often a worker shares its spend while shards of a budgeted run are running."""


def session_of(shard_id: str) -> str:
    """The dispatch session a shard belongs to (shard ids are ``SESSION-N``)."""
    return shard_id.rsplit("-", 1)[0]


class RunSpend:
    """One worker process's spend on one session of a run, shared through the store."""

    def __init__(
        self,
        store: SqlStore,
        run_id: str,
        session: str,
        budget: BudgetSpec | None,
        judges: Callable[[], tuple[int, float]],
        spender: str,
    ) -> None:
        self.store = store
        self.spender = spender  # one worker for its life: a restarted one is a new spender
        self.run_id = run_id
        self.session = session
        self.budget = budget
        self._judges = judges
        self._judges_at_start = judges()  # a kept context's judges spent in earlier sessions
        self.live: list[Spend] = []
        self.finished = Spend()
        self._session_total = (0, 0.0)  # every spender's, as last read
        self._mine_at_read = (0, 0.0)  # this process's part of it
        self._flushing = threading.Lock()

    def start(self) -> Spend:
        """A new shard's spend, counted as it runs."""
        spend = Spend()
        self.live.append(spend)
        return spend

    def end(self, spend: Spend) -> None:
        # by identity: two shards' spends may be equal
        self.live = [s for s in self.live if s is not spend]
        f = self.finished
        f.tokens += spend.tokens
        f.usd += spend.usd
        f.usd_unknown += spend.usd_unknown
        f.calls += spend.calls

    def mine(self) -> Spend:
        """This process's spend on the session: its shards' calls and its judges'."""
        judge_tokens, judge_usd = self._judges()
        out = Spend(
            tokens=self.finished.tokens + judge_tokens - self._judges_at_start[0],
            usd=self.finished.usd + judge_usd - self._judges_at_start[1],
            usd_unknown=self.finished.usd_unknown,
            calls=self.finished.calls,
        )
        for s in self.live:
            out.tokens += s.tokens
            out.usd += s.usd
            out.usd_unknown += s.usd_unknown
            out.calls += s.calls
        return out

    def spent_elsewhere(self, spend: Spend) -> tuple[int, float]:
        """What the run spent besides ``spend`` (one shard's): the other workers' (as last
        read), and this process's judges and other shards (as of now)."""
        mine = self.mine()
        tokens = self._session_total[0] - self._mine_at_read[0] + mine.tokens - spend.tokens
        usd = self._session_total[1] - self._mine_at_read[1] + mine.usd - spend.usd
        return tokens, usd

    def spent(self) -> str | None:
        """Why no more of the session should run (its budget reached, as last read)."""
        tokens, usd = self.spent_elsewhere(Spend())
        return over_budget(self.budget, tokens, usd)

    def flush(self) -> None:
        """Write this process's totals; read the session's (blocking: call it in a thread).
        One at a time, each with the totals as of its turn: a write of older totals landing
        after a newer one would take spend back."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        mine = self.mine()
        record_spend(
            self.store,
            self.run_id,
            self.session,
            self.spender,
            tokens=mine.tokens,
            usd=mine.usd,
            usd_unknown=mine.usd_unknown,
            calls=mine.calls,
        )
        tokens, usd, _, _ = session_spend(self.store, self.run_id, self.session)
        self._session_total, self._mine_at_read = (tokens, usd), (mine.tokens, mine.usd)


def total_spend(store: SqlStore, run_id: str, session: str) -> Spend:
    """Every spender's totals for the session, summed."""
    tokens, usd, unknown, calls = session_spend(store, run_id, session)
    return Spend(tokens=tokens, usd=usd, usd_unknown=unknown, calls=calls)


class StoreWindows:
    """``connectors.RateWindows`` in the store (PostgreSQL for a cluster)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def take(
        self,
        key: str,
        slot: int,
        *,
        requests: float,
        tokens: float,
        request_cap: float | None,
        token_cap: float | None,
    ) -> bool:
        return take_rate(
            self.store,
            key,
            slot,
            requests=requests,
            tokens=tokens,
            request_cap=request_cap,
            token_cap=token_cap,
        )

    def settle(self, key: str, slot: int, tokens: float) -> None:
        settle_rate(self.store, key, slot, tokens)

    def prune(self, key: str, before_slot: int) -> None:
        prune_rate(self.store, key, before_slot)


__all__ = ["FLUSH_S", "RunSpend", "StoreWindows", "session_of", "total_spend"]
