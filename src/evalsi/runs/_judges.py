"""Judge clients for a run: a connector behind the store's judge cache, with accounting.

A judge answer is cached under the content hash of what determines it: the judge's identity
(connector, base URL, model, params), the prompt template's hash, the rendered messages and the
seed. An unchanged suite re-run therefore makes no judge call; a changed rubric, template,
output or judge model does. Secret references are not part of the key (rotating a key does not
change an answer).

An answer is written to the cache only once the evaluator accepted it as a verdict
(``JudgeReply.keep``): a malformed answer would otherwise come back from the cache on every
re-run and stay an ERROR without the judge ever being asked again. A judge with ``cache`` off
(``--no-cache``) neither reads nor writes the cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from evalsi.core import CallAccount, Message, Usage, UserError, content_hash, message_to_dict
from evalsi.evaluators import BoundEvaluator, JudgeReply, judges_needed
from evalsi.runs._pricing import cost_usd
from evalsi.specs import JudgeSpec

if TYPE_CHECKING:  # the connectors (aiohttp) and SQLAlchemy load when a judge is built
    from evalsi.connectors import Resilience
    from evalsi.store import SqlStore

_T = TypeVar("_T")

JUDGE_CONNECTORS = ("openai-compatible", "anthropic", "azure-openai", "gemini", "bedrock")
"""Every model connector judges (``connectors.MODEL_CONNECTORS``, kept here without loading
the connectors)."""
# A judge given as a mapping: JudgeSpec's fields, or their spellings in a spec file.
_JUDGE_FIELDS = {
    **{f.name: f.name for f in dataclasses.fields(JudgeSpec) if f.name != "name"},
    "baseUrl": "base_url",
    "secretRef": "secret_ref",
    "timeoutSeconds": "timeout_s",
    "maxConcurrency": "max_concurrency",
    "apiVersion": "api_version",
}


JudgeAccount = CallAccount
"""What one judge cost in this session."""


class StoreJudge:
    """A ``JudgeClient``: the connector, the store's judge cache and this judge's account."""

    def __init__(self, spec: JudgeSpec, store: SqlStore, *, resilience: Resilience | None = None):
        if spec.connector not in JUDGE_CONNECTORS:
            raise UserError(
                f"judge {spec.name!r}: unknown connector {spec.connector!r}",
                hint="use one of: " + ", ".join(JUDGE_CONNECTORS),
            )
        if not spec.model:
            raise UserError(f"judge {spec.name!r}: model is required")
        from evalsi.connectors import chat_model, resolve_secret

        key = resolve_secret(spec.secret_ref) if spec.secret_ref else None
        self.connector = chat_model(
            spec.connector,
            spec.base_url,
            spec.model,
            spec.params,
            api_key=key,
            api_version=spec.api_version,
            region=spec.region,
            auth=spec.auth,
            timeout=spec.timeout_s,
            resilience=resilience,
            at=f"spec.judges.{spec.name}",
        )
        self.spec = dataclasses.replace(spec, base_url=self.connector.base_url)
        self.store = store
        self.account = JudgeAccount()
        self._limit = asyncio.Semaphore(max(1, spec.max_concurrency))
        ident = self.spec.identity()
        ident.pop("secret_ref")
        ident.pop("name")
        self._key_base = ident

    def identity(self) -> dict[str, Any]:
        return self.spec.identity()

    def cache_key(self, messages: list[Message], *, seed: int | None, template: str) -> str:
        return content_hash(
            {
                "judge": self._key_base,
                "template": template,
                "messages": [message_to_dict(m) for m in messages],
                "seed": seed,
            }
        )

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, template: str = ""
    ) -> JudgeReply:
        key = self.cache_key(messages, seed=seed, template=template)
        if self.spec.cache:
            hit = await self._cache(self.store.judge_cache_get, key)
            if hit is not None:
                self.account.cached += 1
                zero = Usage(input_tokens=0, output_tokens=0, total_tokens=0, cost_usd=0.0)
                return JudgeReply(hit[0], zero, cached=True)
        async with self._limit:
            try:
                completion = await self.connector.complete(messages, seed=seed)
            except UserError as e:  # the connector's hint speaks of a target
                if getattr(e, "status", None) in (401, 403):
                    e.hint = self._key_hint()
                raise
        usage = completion.usage
        usage.latency_ms = None  # the judge's latency is not the target's cost
        price = cost_usd(self.spec.model, usage)
        if price is not None:
            usage.cost_usd = price
        self._account(usage, price)
        if not self.spec.cache:
            return JudgeReply(completion.text, usage, cached=False)
        known = {k: v for k in usage.__slots__ if (v := getattr(usage, k)) is not None}

        async def keep() -> None:
            await self._cache(self.store.judge_cache_put, key, completion.text, known)

        return JudgeReply(completion.text, usage, cached=False, keep=keep)

    def _key_hint(self) -> str:
        ref = self.spec.secret_ref
        if not ref:
            return f"judge {self.spec.name!r} sends no API key: give it a secretRef (env:NAME)"
        return f"check the API key judge {self.spec.name!r}'s secretRef ({ref}) points to"

    async def _cache(self, call: Callable[..., _T], *args: Any) -> _T:
        """A judge-cache read or write, in a thread for a store other processes share: on a
        busy SQLite file (ingest committing) it may wait for the lock, and this runs on a
        server's event loop. An in-memory store's one connection stays on its own thread."""
        if self.store.is_sqlite_file or self.store.engine.dialect.name == "postgresql":
            return await asyncio.to_thread(call, *args)
        return call(*args)

    def _account(self, usage: Usage, price: float | None) -> None:
        account = self.account
        account.calls += 1
        account.input_tokens += usage.input_tokens or 0
        account.output_tokens += usage.output_tokens or 0
        account.tokens += usage.tokens() or 0
        if price is None:
            account.usd_unknown += 1
        else:
            account.usd += price


JudgeLike = JudgeSpec | Mapping[str, Any]
"""A judge as a ``JudgeSpec`` or a plain mapping (``{"model": ..., "baseUrl": ...}``)."""


def judge_specs(judges: Mapping[str, JudgeLike] | None) -> dict[str, JudgeSpec]:
    """Judge specs from ``JudgeSpec`` values or plain mappings (``{"model": ..., "baseUrl":
    ...}``, camelCase or snake_case keys), keyed by name; a bad mapping is a ``UserError``."""
    out: dict[str, JudgeSpec] = {}
    for name, value in (judges or {}).items():
        if isinstance(value, JudgeSpec):
            out[name] = dataclasses.replace(value, name=name)
            continue
        if not isinstance(value, Mapping):
            raise UserError(f"judges.{name}: expected a mapping with connector, baseUrl, model")
        unknown = sorted(set(value) - set(_JUDGE_FIELDS))
        if unknown:
            raise UserError(
                f"judges.{name}: unknown field(s) {', '.join(map(repr, unknown))}",
                hint="known: connector, baseUrl, model, params, secretRef, timeoutSeconds, "
                "maxConcurrency, scale, cache, apiVersion, region",
            )
        if not value.get("model"):
            raise UserError(f"judges.{name}: model is required")
        kwargs = {_JUDGE_FIELDS[k]: v for k, v in value.items()}
        kwargs["params"] = dict(kwargs.get("params") or {})
        if kwargs.get("scale") is not None:
            kwargs["scale"] = judge_scale(kwargs["scale"], f"judges.{name}.scale")
        if not isinstance(kwargs.get("cache", True), bool):
            raise UserError(f"judges.{name}.cache: expected true or false")
        out[name] = JudgeSpec(name=name, **kwargs)
    return out


def judge_scale(value: Any, where: str) -> tuple[float, float]:
    """A judge's scale from ``{"min": 1, "max": 5}`` or ``[1, 5]``; a ``UserError`` naming
    ``where`` otherwise.

    Example:
        >>> judge_scale({"min": 1, "max": 5}, "judges.default.scale")
        (1.0, 5.0)
    """
    if isinstance(value, Mapping):
        pair = (value.get("min"), value.get("max"))
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        pair = (value[0], value[1])
    else:
        pair = (None, None)
    low, high = pair
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
    if not numbers or not float(low) < float(high):  # type: ignore[arg-type]
        raise UserError(
            f"{where}: expected {{min, max}} numbers with min below max, got {value!r}",
            hint="e.g. scale: {min: 1, max: 5} for a judge that answers 1 to 5",
        )
    return float(low), float(high)  # type: ignore[arg-type]


def run_judges(document: Mapping[str, Any]) -> dict[str, Any]:
    """The judges a stored run's spec ``document`` configured, as mappings for ``judge_specs``:
    YAML (camelCase under ``spec``) or a spec built in code (dataclass fields)."""
    found = (document.get("spec") or {}).get("judges") or document.get("judges") or {}
    # Specs built in code store dataclass fields; ``name`` is the key itself.
    return {k: {f: v for f, v in j.items() if f != "name"} for k, j in found.items()}


def without_cache(judges: Mapping[str, JudgeLike] | None) -> dict[str, JudgeSpec]:
    """``judges`` as specs with the judge cache off (``--no-cache``): every answer is asked
    for, and none is stored.

    Example:
        >>> without_cache({"default": {"model": "m", "baseUrl": "http://x/v1"}})["default"].cache
        False
    """
    return {
        name: dataclasses.replace(spec, cache=False) for name, spec in judge_specs(judges).items()
    }


def check_judges(bound: list[BoundEvaluator], specs: Mapping[str, JudgeSpec]) -> None:
    """A ``UserError`` when an evaluator asks for a judge that is not configured (no default)."""
    for name, users in judges_needed(bound).items():
        if name not in specs:
            raise UserError(
                f"{', '.join(users)} needs a judge named {name!r}, and none is configured "
                "(evalsi has no default judge)",
                hint=f"evalsi eval: --judges judges.yaml with a judge {name!r}; a run spec: "
                f"spec.judges.{name} {{connector, baseUrl, model, secretRef}}; Python: "
                f"evalsi.evaluate(..., judges={{{name!r}: {{...}}}})",
            )


def build_judges(
    specs: Mapping[str, JudgeSpec],
    store: SqlStore,
    bound: list[BoundEvaluator],
    *,
    resilience: Resilience | None = None,
) -> dict[str, StoreJudge]:
    """Clients for the judges the bound evaluators use (secrets resolved here; no call made).

    Without ``resilience`` the run gets its own (breakers, limiters): a judge whose breaker
    opened in one run must not stay open for the next run in the same process.
    """
    check_judges(bound, specs)
    if not specs:
        return {}
    from evalsi.connectors import Resilience

    shared = resilience if resilience is not None else Resilience()
    return {name: StoreJudge(spec, store, resilience=shared) for name, spec in specs.items()}


def judges_summary(judges: Mapping[str, StoreJudge]) -> dict[str, Any]:
    """Per judge: calls, cache hits, tokens and USD of this session (for the run summary)."""
    return {name: judge.account.to_dict() for name, judge in judges.items()}


def judges_manifest(judges: Mapping[str, StoreJudge]) -> dict[str, Any]:
    return {name: judge.identity() for name, judge in judges.items()}


def judge_totals(judges: Mapping[str, Any]) -> tuple[int, float]:
    """Tokens and USD the judges used so far (budgets count them with the target's)."""
    accounts = [j.account for j in judges.values()]
    return sum(a.tokens for a in accounts), sum(a.usd for a in accounts)


__all__ = [
    "JudgeAccount",
    "JudgeLike",
    "StoreJudge",
    "build_judges",
    "check_judges",
    "judge_scale",
    "judge_specs",
    "judge_totals",
    "judges_manifest",
    "judges_summary",
    "run_judges",
    "without_cache",
]
