"""A run's summary POSTed to an HTTP endpoint when the run has ended.

The body is JSON (``event``, ``delivery``, ``run``, ``summary``). With a secret the body is
signed: ``X-Evalsi-Signature: sha256=HEX``, the HMAC-SHA256 of the exact bytes, so the
receiver can tell the sender and that nothing changed on the way. ``X-Evalsi-Delivery`` stays
the same across retries and re-exports of an unchanged run, so a receiver drops duplicates.
Retried on 429, 5xx and lost connections (``Retry-After`` honoured, bounded); a redirect is
not followed (it could point anywhere).
"""

from __future__ import annotations

import hashlib
import hmac
import random
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from evalsi.core import UserError
from evalsi.sinks._sink import Receipt, ResultRow, RunHeader

ATTEMPTS = 5
MAX_WAIT_S = 30.0
SIGNATURE = "X-Evalsi-Signature"
DELIVERY = "X-Evalsi-Delivery"
EVENT = "run.finished"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx surfaces as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirect)


class WebhookSink:
    kind = "webhook"

    def __init__(
        self,
        url: str,
        secret: str = "",
        timeout_s: float = 10.0,
        sleep: Any = time.sleep,
    ) -> None:
        self.target = url
        self.secret = secret
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.header: RunHeader | None = None
        self.rows = 0

    def begin(self, run: RunHeader) -> None:
        self.header = run

    def write(self, rows: Sequence[ResultRow]) -> None:
        self.rows += len(rows)  # the summary is sent; rows are counted for the receipt

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        assert self.header is not None
        payload = {"run": self.header.to_dict(), "summary": dict(summary)}
        digest = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()
        delivery = f"{self.header.run_id}.{digest[:16]}"
        body = orjson.dumps(
            {"event": EVENT, "delivery": delivery, **payload}, option=orjson.OPT_SORT_KEYS
        )
        headers = {"Content-Type": "application/json", DELIVERY: delivery}
        if self.secret:
            mac = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
            headers[SIGNATURE] = f"sha256={mac}"
        status = self._post(body, headers)
        return Receipt(
            self.kind, self.target, self.rows, {"delivery": delivery, "status": str(status)}
        )

    def _post(self, body: bytes, headers: dict[str, str]) -> int:
        last = ""
        for attempt in range(1, ATTEMPTS + 1):
            request = urllib.request.Request(self.target, data=body, headers=headers, method="POST")
            wait: float | None = None
            try:
                with _OPENER.open(request, timeout=self.timeout_s) as response:
                    return int(response.status)
            except urllib.error.HTTPError as e:
                e.close()  # its socket, or it lingers until collected
                last = f"HTTP {e.code}"
                if e.code != 429 and e.code < 500:
                    raise UserError(f"webhook sink {self.target}: {last} (not retried)") from None
                wait = _retry_after(e.headers.get("Retry-After"))
            except (urllib.error.URLError, OSError) as e:
                last = str(getattr(e, "reason", e))
            if attempt < ATTEMPTS:
                backoff = min(MAX_WAIT_S, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
                self.sleep(min(MAX_WAIT_S, wait if wait is not None else backoff))
        raise UserError(f"webhook sink {self.target}: gave up after {ATTEMPTS} attempts ({last})")

    def close(self) -> None:
        pass


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def verify(secret: str, body: bytes, signature: str) -> bool:
    """Whether ``signature`` (the header's value) signs ``body`` with ``secret``: what a
    receiver runs, in constant time."""
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(f"sha256={mac}", signature)
