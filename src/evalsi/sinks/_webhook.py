"""A run's summary POSTed to an HTTP endpoint when the run has ended; an online policy's
scores POSTed in batches as traces are graded (``WebhookTraceSink``).

The body is JSON (``event``, ``delivery``, then ``run`` and ``summary``, or ``scores``). With a
secret the body is signed: ``X-Evalsi-Signature: sha256=HEX``, the HMAC-SHA256 of the exact
bytes, so the receiver can tell the sender and that nothing changed on the way. The
``X-Evalsi-Delivery`` stays the same across retries and re-exports of an unchanged run, so a
receiver drops duplicates. Retried on 429, 5xx and lost connections (``Retry-After``
honoured, bounded); a redirect is not followed (it could point anywhere).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from evalsi.core import UserError
from evalsi.sinks._sink import Receipt, ResultRow, RunHeader, TraceScore

ATTEMPTS = 5
MAX_WAIT_S = 30.0
SIGNATURE = "X-Evalsi-Signature"
DELIVERY = "X-Evalsi-Delivery"
EVENT = "run.finished"
SCORES_EVENT = "policy.scores"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx surfaces as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirect)


class _Hook:
    """A webhook endpoint: where, the signing secret, how long one attempt may take."""

    kind = "webhook"

    def __init__(
        self,
        url: str,
        secret: str = "",
        timeout_s: float = 10.0,
        sleep: Any = time.sleep,
        egress: Any = None,  # an evalsi.connectors.EgressPolicy (a sibling layer)
    ) -> None:
        self.target = url
        self.secret = secret
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.egress = egress

    def close(self) -> None:
        pass


class WebhookSink(_Hook):
    def __init__(
        self, url: str, secret: str = "", timeout_s: float = 10.0, sleep: Any = time.sleep
    ) -> None:
        super().__init__(url, secret, timeout_s, sleep)
        self.header: RunHeader | None = None
        self.rows = 0

    def begin(self, run: RunHeader) -> None:
        self.header = run

    def write(self, rows: Sequence[ResultRow]) -> None:
        self.rows += len(rows)  # the summary is sent; rows are counted for the receipt

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        assert self.header is not None
        payload = {"run": self.header.to_dict(), "summary": dict(summary)}
        delivery, status = _deliver(
            self.target, EVENT, self.header.run_id, payload, self.secret, self.timeout_s, self.sleep
        )
        return Receipt(
            self.kind, self.target, self.rows, {"delivery": delivery, "status": str(status)}
        )


class WebhookTraceSink(_Hook):
    """An online policy's scores, a batch per POST: ``{"event": "policy.scores", "delivery",
    "scores": [...]}``, each score as ``TraceScore.to_dict`` gives it. The delivery id is the
    batch's content hash, so a retried batch carries the same one. With ``egress`` (a
    server's), every address the URL's host resolves to is checked before each POST: the
    static check when the policy is applied cannot see where a name points."""

    def send(self, scores: Sequence[TraceScore]) -> Receipt:
        if self.egress is not None:
            _check_resolved(self.target, self.egress)
        payload = {"scores": [s.to_dict() for s in scores]}
        first = scores[0].policy if scores else "scores"
        delivery, status = _deliver(
            self.target, SCORES_EVENT, first, payload, self.secret, self.timeout_s, self.sleep,
            identity={"scores": [(s.score_id, s.value, s.label) for s in scores]},
        )  # fmt: skip
        return Receipt(
            self.kind, self.target, len(scores), {"delivery": delivery, "status": str(status)}
        )


def _check_resolved(url: str, egress: Any) -> None:
    """``EgressDenied`` when any address ``url``'s host resolves to is refused (a name in
    ``/etc/hosts`` or DNS pointing at loopback or the metadata service)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise UserError(f"webhook sink {url}: cannot resolve {host} ({e})") from None
    for *_, address in found:
        egress.check(host, ipaddress.ip_address(str(address[0]).split("%")[0]), port)


def _deliver(
    url: str,
    event: str,
    prefix: str,
    payload: Mapping[str, Any],
    secret: str,
    timeout_s: float,
    sleep: Any,
    identity: Any = None,
) -> tuple[str, int]:
    """POST ``payload`` as ``event``, signed with ``secret``; the delivery id is ``prefix``
    and the hash of ``identity`` (default: the payload). Returns (delivery id, status)."""
    seen = payload if identity is None else identity
    digest = hashlib.sha256(orjson.dumps(seen, option=orjson.OPT_SORT_KEYS)).hexdigest()
    delivery = f"{prefix}.{digest[:16]}"
    body = orjson.dumps(
        {"event": event, "delivery": delivery, **payload}, option=orjson.OPT_SORT_KEYS
    )
    headers = {"Content-Type": "application/json", DELIVERY: delivery}
    if secret:
        mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers[SIGNATURE] = f"sha256={mac}"
    return delivery, _post(url, body, headers, timeout_s, sleep)


def _post(url: str, body: bytes, headers: dict[str, str], timeout_s: float, sleep: Any) -> int:
    last = ""
    for attempt in range(1, ATTEMPTS + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        wait: float | None = None
        try:
            with _OPENER.open(request, timeout=timeout_s) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            e.close()  # its socket, or it lingers until collected
            last = f"HTTP {e.code}"
            if e.code != 429 and e.code < 500:
                raise UserError(f"webhook sink {url}: {last} (not retried)") from None
            wait = _retry_after(e.headers.get("Retry-After"))
        except (urllib.error.URLError, OSError) as e:
            last = str(getattr(e, "reason", e))
        if attempt < ATTEMPTS:
            backoff = min(MAX_WAIT_S, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            sleep(min(MAX_WAIT_S, wait if wait is not None else backoff))
    raise UserError(f"webhook sink {url}: gave up after {ATTEMPTS} attempts ({last})")


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
