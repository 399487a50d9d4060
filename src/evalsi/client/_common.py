"""What the sync and async clients share: settings, transports, the pieces of each call that
do no I/O."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from connectrpc.protocol import ProtocolType

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi.client._requests import instance_name
from evalsi.core import EvaluationResult, MetricSummary, RunError, UserError
from evalsi.wire import result_from_proto, struct_from_proto, summary_from_proto

Protocol = Literal["connect", "grpc", "grpc-web"]

PROTOCOLS: dict[str, ProtocolType] = {
    "connect": ProtocolType.CONNECT,
    "grpc": ProtocolType.GRPC,
    "grpc-web": ProtocolType.GRPC_WEB,
}
DEFAULT_TIMEOUT = 300.0
WATCH_PAGE = 1000

# evalsi.evaluate arguments that name something only a local process has.
_LOCAL_ONLY = {
    "store": "results are stored by the server",
    "registry": "the server resolves evaluators against its own registry",
    "judges": "judges are configured on the server (`judges:` in its evalsi.yaml)",
}


@dataclass(frozen=True)
class Settings:
    url: str
    protocol: Protocol
    timeout: float | None
    headers: dict[str, str] = field(default_factory=dict)
    project: str = ""  # the project of calls that name none ("": the server's default)

    @property
    def timeout_ms(self) -> int | None:
        return None if self.timeout is None else max(int(self.timeout * 1000), 1)

    @property
    def protocol_type(self) -> ProtocolType:
        return PROTOCOLS[self.protocol]


def settings(
    url: str,
    protocol: str,
    timeout: float | None,
    headers: Mapping[str, str] | None,
    token: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
) -> Settings:
    text = url.strip().rstrip("/")
    if not text.startswith(("http://", "https://")):
        raise UserError(
            f"server URL {url!r}: expected http://HOST:PORT or https://HOST:PORT",
            hint="for example http://127.0.0.1:8080",
        )
    if protocol not in PROTOCOLS:
        raise UserError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    if timeout is not None and timeout <= 0:
        raise UserError(f"timeout {timeout}: expected a positive number of seconds, or None")
    sent = dict(headers or {})
    credential = credential_for(token, api_key, text)
    if credential and not any(k.lower() == "authorization" for k in sent):
        sent["authorization"] = f"Bearer {credential}"
    chosen = (project if project is not None else os.environ.get("EVALSI_PROJECT", "")).strip()
    return Settings(text, protocol, timeout, sent, chosen)  # type: ignore[arg-type]


def credential_for(
    token: str | None = None, api_key: str | None = None, url: str | None = None
) -> str | None:
    """What a client sends as ``Authorization: Bearer``: ``token`` or ``api_key`` when given,
    else ``EVALSI_TOKEN``, else ``EVALSI_API_KEY`` from the environment, else the token
    ``evalsi login`` kept for ``url`` (renewed when it is about to expire)."""
    for value in (token, api_key, os.environ.get("EVALSI_TOKEN"), os.environ.get("EVALSI_API_KEY")):
        if value and value.strip():
            return value.strip()
    if url is None:
        return None
    from evalsi.auth import login_token

    return login_token(url)


def scoped(request: Any, project: str) -> Any:
    """``request`` with ``project`` in its empty ``project_id`` (a message without the field,
    or one that names its project, is left as it is)."""
    if project and "project_id" in request.DESCRIPTOR.fields_by_name and not request.project_id:
        request.project_id = project
    return request


def check_local_only(options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if key in _LOCAL_ONLY:
            if value in (None, ""):
                continue
            raise UserError(f"{key}= cannot be used with a server: {_LOCAL_ONLY[key]}")
        raise UserError(f"unexpected argument {key}= for Client.evaluate")


def gate_list(gates: str | Sequence[str]) -> list[str]:
    """The gate expressions to send (one string is one gate, as ``evalsi.evaluate`` takes it);
    the server parses and evaluates them."""
    if not gates:
        return []
    exprs = [gates] if isinstance(gates, str) else list(gates)
    for i, expr in enumerate(exprs):
        if not isinstance(expr, str):
            raise UserError(f"gates[{i}]: expected a CEL expression string, got {expr!r}")
    return exprs


def check_gates(sent: Sequence[str], returned: Sequence[Any], url: str) -> None:
    """A server that ignored the gates (older than the gates of Evaluate) must not pass a
    gated call silently."""
    if len(returned) != len(sent):
        raise RunError(
            f"the evalsi server at {url} answered {len(returned)} gate result(s) for "
            f"{len(sent)} gate(s)",
            hint="upgrade the server: it is older than Evaluate with gates",
        )


def spec_dicts(
    specs: Sequence[ev_pb.EvaluatorSpec], refs: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The evaluators as the embedded result lists them: instance name, exact ref, params."""
    return [
        {
            "name": (name := instance_name(spec)),
            "ref": refs.get(name, spec.ref),
            "params": struct_from_proto(spec.params),
        }
        for spec in specs
    ]


def exact_refs(results: Iterable[EvaluationResult]) -> dict[str, str]:
    refs: dict[str, str] = {}
    for r in results:
        if r.evaluator_ref and r.evaluator not in refs:
            refs[r.evaluator] = r.evaluator_ref
    return refs


@dataclass(frozen=True)
class StreamUpdate:
    """One message of ``evaluate_stream``: results as they complete; the last one also carries
    the metric summaries and the dataset version."""

    run_id: str
    results: list[EvaluationResult]
    metrics: list[MetricSummary]
    dataset_version: str


def stream_update(message: ev_pb.EvaluateStreamResponse) -> StreamUpdate:
    return StreamUpdate(
        run_id=str(message.run_id),
        results=[result_from_proto(r) for r in message.results],
        metrics=[summary_from_proto(m) for m in message.metrics],
        dataset_version=str(message.dataset_version),
    )
