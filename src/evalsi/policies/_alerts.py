"""Alerts of an online policy: fire on the transition to true, deliver to a webhook.

An alert fires once when its condition over the window turns true, and re-arms only once the
condition has been false again (so a metric that stays low does not page every trace), and
``cooldown`` keeps a flapping metric from firing more often than that. A condition that cannot
be decided on the window (no data yet: ``mean('x')`` is null) counts as false.

Delivery is a JSON POST with a timeout and a few retries on connection errors, timeouts and 5xx
answers; a delivery that still fails is counted, logged and dropped. Nothing here raises into
the engine: a dead webhook must never stop grading. On a server the notifier carries its egress
policy: every connection (each redirect hop too) is checked, and a refused one is logged with
the rule and not retried.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from evalsi.connectors import EgressDenied, EgressPolicy

log = logging.getLogger("evalsi.policies")

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_RETRIES = 2
_BACKOFF_S = (0.2, 1.0, 3.0)


@dataclass(slots=True)
class AlertState:
    """Where one alert is: whether its condition holds now, and when it last fired."""

    firing: bool = False
    last_fired: float | None = None
    fired: int = 0

    def update(self, holds: bool, now: float, cooldown_s: float) -> bool:
        """Record the condition's value; True when the alert should fire now."""
        if not holds:
            self.firing = False
            return False
        if self.firing:
            return False
        # Within the cooldown the alert stays armed (not firing), so a condition that is
        # still true once the cooldown is over fires then.
        if self.last_fired is not None and now - self.last_fired < cooldown_s:
            return False
        self.firing = True
        self.last_fired = now
        self.fired += 1
        return True


class Notifier(Protocol):
    """Delivers an alert's payload; True when it was delivered."""

    async def send(self, url: str, payload: dict[str, Any]) -> bool: ...

    async def close(self) -> None: ...


class WebhookNotifier:
    """POSTs JSON with aiohttp: ``timeout_s`` per attempt, ``retries`` more attempts.

    ``egress`` (a server's policy) limits where the POST and its redirects may connect; None
    (embedded) lets a webhook be anywhere.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        egress: EgressPolicy | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.retries = retries
        self.egress = egress
        self._session: Any = None

    async def _client(self) -> Any:
        import aiohttp

        if self._session is None or self._session.closed:
            connector = None
            if self.egress is not None:
                from evalsi.connectors import egress_connector

                connector = egress_connector(self.egress, limit=100)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                headers={"User-Agent": "evalsi-watch"},
            )
        return self._session

    async def send(self, url: str, payload: dict[str, Any]) -> bool:
        import aiohttp

        session = await self._client()
        for attempt in range(self.retries + 1):
            try:
                async with session.post(url, json=payload) as response:
                    await response.read()
                    if response.status < 300:
                        return True
                    if response.status < 500 and response.status != 429:
                        log.warning("webhook %s refused the alert: HTTP %s", url, response.status)
                        return False
                    why = f"HTTP {response.status}"
            except EgressDenied as e:
                log.warning("webhook %s: alert not delivered: %s", url, e)
                return False
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                why = f"{type(e).__name__}: {e}"
            if attempt < self.retries:
                await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
        log.warning("webhook %s: alert not delivered after %d attempts (%s)", url, attempt + 1, why)
        return False

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
