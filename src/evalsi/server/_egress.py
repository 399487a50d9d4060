"""The server's egress policy, and the checks of what a caller submits against it.

``server_egress`` is the policy every outbound call of the server runs under: ``egress`` of
``evalsi.yaml``, the address the server listens on (``allowPrivate: auto`` follows it), and
the endpoints of the judges configured in ``evalsi.yaml``, which the operator named and so are
allowed by host and port. The score exporter (``traces.export``) is operator configuration
too and is not checked.

The checks here are static (the URLs as written: literal addresses, metadata and localhost
names, deny entries naming a host or port) so a caller gets a 400 naming the field and the rule
before anything starts. Where a URL names a host to be resolved, the connection itself is
checked (``evalsi.connectors``): a run's task ends as ``infra_error(egress_denied)`` and an
alert is logged as not delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalsi.connectors import EgressPolicy, trusted_rule

if TYPE_CHECKING:
    from evalsi.policies import PolicySpec  # as _policies reads it
    from evalsi.runs import RunSpec
    from evalsi.server._state import ServerConfig
    from evalsi.specs import SinkSpec


def server_egress(config: ServerConfig) -> EgressPolicy:
    """The policy for calls this server makes on a caller's behalf."""
    trusted = [
        rule
        for name, judge in sorted(config.judges.items())
        if judge.base_url
        and (rule := trusted_rule(judge.base_url, f"evalsi.yaml judges.{name}")) is not None
    ]
    return config.egress.serving(config.host, trusted=trusted)


def check_run_egress(spec: RunSpec, policy: EgressPolicy) -> None:
    """``EgressDenied`` (a 400) when the run's target or a judge is refused as written."""
    target = spec.target
    if target.kind == "model" and target.base_url:
        policy.check_url(target.base_url, where="spec.target.model.baseUrl")
    elif target.kind == "agent" and target.base_url:
        policy.check_url(target.base_url, where="spec.target.agent.model.baseUrl")
    elif target.kind == "http" and isinstance(target.http.get("url"), str):
        policy.check_url(target.http["url"], where="spec.target.http.url")
    agent = target.agent
    if agent is not None:
        for kind, key, field in (
            ("a2a", "url", "url"),
            ("mcp", "url", "url"),
            ("responses", "base_url", "baseUrl"),
            ("http", "url", "url"),
        ):
            section = getattr(agent, kind)
            url = getattr(section, key, "") if section is not None else ""
            if url:
                policy.check_url(url, where=f"spec.target.agent.{kind}.{field}")
        if agent.user is not None and agent.user.base_url:
            policy.check_url(agent.user.base_url, where="spec.target.agent.user.model.baseUrl")
    for i, tool in enumerate(spec.environment.tools if spec.environment else ()):
        if tool.url:
            policy.check_url(tool.url, where=f"spec.environment.tools[{i}].mcp.url")
    for name, judge in sorted(spec.judges.items()):
        if judge.base_url:
            policy.check_url(judge.base_url, where=f"spec.judges.{name}.baseUrl")
    if spec.telemetry is not None:
        policy.check_url(spec.telemetry.endpoint, where="spec.telemetry.otlp.endpoint")
    _check_sinks(spec.sinks, policy)


def check_policy_egress(spec: PolicySpec, policy: EgressPolicy) -> None:
    """``EgressDenied`` (a 400) when an alert's webhook or a judge is refused as written."""
    for i, alert in enumerate(spec.alerts):
        policy.check_url(alert.notify, where=f"spec.alerts[{i}].notify")
    for name, judge in sorted(spec.judges.items()):
        if judge.base_url:
            policy.check_url(judge.base_url, where=f"spec.judges.{name}.baseUrl")
    _check_sinks(spec.sinks, policy)


def _check_sinks(sinks: Sequence[SinkSpec], policy: EgressPolicy) -> None:
    for i, sink in enumerate(sinks):
        for key, url in sink.urls():
            policy.check_url(url, where=f"spec.sinks[{i}].{sink.kind}.{key}")
