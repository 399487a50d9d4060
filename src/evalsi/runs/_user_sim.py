"""The simulated user of an agent run, built like a judge: its connector (with the run's
retries and breakers), the pricing file for its spend, and the store's answer cache.

Its answers share the judge cache's table: a key is the content hash of the simulator's
identity, the conversation so far and the seed, under a ``user_simulator`` label no judge key
has, so the two never meet. The cache is attached once the run's store is open
(``attach_cache``), which is after the target is built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from evalsi.core import UserError
from evalsi.specs import UserSimulatorSpec

if TYPE_CHECKING:
    from evalsi.agents import UserSimulator
    from evalsi.connectors import Resilience
    from evalsi.store import SqlStore

_T = TypeVar("_T")


def build_user_simulator(
    spec: UserSimulatorSpec, *, resilience: Resilience | None = None
) -> UserSimulator:
    """The simulator for ``spec`` (secret resolved, no call made); a ``UserError`` naming the
    field for a bad one."""
    from evalsi.agents import UserSimulator
    from evalsi.connectors import MODEL_CONNECTORS, chat_model, resolve_secret
    from evalsi.runs._pricing import costing, price

    at = "spec.target.agent.user"
    if spec.connector == "scripted":
        return UserSimulator(spec)
    if spec.connector not in MODEL_CONNECTORS:
        UserSimulator(spec)  # raises the unknown-connector error
    if not spec.model:
        raise UserError(f"{at}.model.model: the simulator's model is required")
    if spec.max_usd is not None and price(spec.model) is None:
        raise UserError(  # a budget that cannot be counted would never stop it
            f"{at}.maxUsd: no price for model {spec.model!r}, so spend cannot be counted",
            hint="add the model to a pricing file named by EVALSI_PRICING, or drop maxUsd",
        )
    key = resolve_secret(spec.secret_ref) if spec.secret_ref else None
    model = chat_model(
        spec.connector,
        spec.base_url,
        spec.model,
        spec.params,
        api_key=key,
        api_version=spec.api_version,
        region=spec.region,
        auth=spec.auth,
        resilience=resilience,
        at=f"{at}.model",
    )
    return UserSimulator(spec, model, price=costing())


class StoreReplyCache:
    """The simulator's ``ReplyCache`` over the store's judge cache table."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def get(self, key: str) -> str | None:
        hit = await self._call(self.store.judge_cache_get, key)
        return hit[0] if hit is not None else None

    async def put(self, key: str, text: str, usage: Mapping[str, Any]) -> None:
        await self._call(self.store.judge_cache_put, key, text, dict(usage))

    async def _call(self, call: Callable[..., _T], *args: Any) -> _T:
        # as StoreJudge._cache: a shared file or server may wait for its lock, off the loop
        if self.store.is_sqlite_file or self.store.engine.dialect.name == "postgresql":
            return await asyncio.to_thread(call, *args)
        return call(*args)


def attach_cache(target: Any, store: SqlStore) -> None:
    """Give an agent target's simulated user the store's cache (no-op for other targets)."""
    user = getattr(target, "user", None)
    if user is not None and user.spec.connector != "scripted":
        user.cache = StoreReplyCache(store)


def user_summary(target: Any) -> dict[str, Any] | None:
    """The simulated user's account for the run summary, or None without one."""
    user = getattr(target, "user", None)
    return None if user is None else dict(user.account.to_dict())
