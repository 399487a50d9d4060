"""The ``traces`` section of evalsi.yaml: OTLP ports, grace period, retention, redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import SpecError
from evalsi.server._config import load_config


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path).traces


def test_defaults(tmp_path: Path) -> None:
    t = _load(tmp_path, "{}")
    assert (t.otlp.grpc_port, t.otlp.http_port) == (None, None)
    assert t.grace_s == 5.0
    assert t.retention_s == 7 * 86400.0
    assert t.redaction == ()


def test_every_field(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        r"""
traces:
  otlp: {grpcPort: 4317, httpPort: 4318, maxInflightBytes: 1048576}
  gracePeriod: 2500ms
  maxOpenTraces: 10
  retention: {default: 1d, projects: {demo: 12h, audit: never}}
  redaction:
    - {name: email, pattern: '[\w.+-]+@[\w-]+\.[\w.]+', replacement: '[EMAIL]', keys: ['gen_ai.*']}
""",
    )
    assert (t.otlp.grpc_port, t.otlp.http_port, t.otlp.max_inflight_bytes) == (4317, 4318, 1 << 20)
    assert t.grace_s == 2.5
    assert t.max_open_traces == 10
    assert t.retention_s == 86400.0
    assert t.project_retention_s == {"demo": 43200.0, "audit": None}
    (rule,) = t.redaction
    assert (rule.name, rule.replacement, rule.keys) == ("email", "[EMAIL]", ("gen_ai.*",))
    assert rule.pattern.sub("x", "me@a.io") == "x"


def test_plain_retention_and_never(tmp_path: Path) -> None:
    assert _load(tmp_path, "traces: {retention: never}").retention_s is None
    assert _load(tmp_path, "traces: {retention: 90m, gracePeriod: 0}").retention_s == 5400.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("traces: {colour: 1}", "unknown field 'colour'"),
        ("traces: {otlp: {grpcPort: x}}", "traces.otlp.grpcPort: expected an integer"),
        ("traces: {otlp: {port: 1}}", "traces.otlp.port: unknown field"),
        ("traces: {gracePeriod: soon}", "traces.gracePeriod: expected a duration"),
        ("traces: {retention: -1}", "traces.retention: expected"),
        ("traces: {retention: {projects: [a]}}", "traces.retention.projects: expected a mapping"),
        ("traces: {retention: {projects: {a: forever}}}", "traces.retention.projects.a"),
        (
            "traces: {redaction: [{pattern: '('}]}",
            "traces.redaction[0].pattern: '(' is not a valid",
        ),
        ("traces: {maxOpenTraces: 0}", "traces.maxOpenTraces: expected an integer"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, text)
    assert message in str(e.value)


# -- traces.export: policy scores to an OTLP logs endpoint ----------------------------------------
def test_no_export_by_default(tmp_path: Path) -> None:
    assert _load(tmp_path, "{}").export is None
    assert _load(tmp_path, "traces: {export: {}}").export is None


def test_export_endpoint_headers_and_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSI_TEST_COLLECTOR_KEY", "s3cret")
    export = _load(
        tmp_path,
        """
traces:
  export:
    otlp:
      endpoint: https://collector.example:4318/custom/logs
      headers: {x-api-key: env:EVALSI_TEST_COLLECTOR_KEY, X-Scope-OrgID: tenant-1}
      timeout: 2500ms
""",
    ).export
    assert export is not None
    assert export.endpoint == "https://collector.example:4318/custom/logs"
    assert export.headers == {"x-api-key": "s3cret", "X-Scope-OrgID": "tenant-1"}
    assert export.timeout_s == 2.5


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/logs"),
        ("http://collector:4318/", "http://collector:4318/v1/logs"),
        ("http://collector/otlp/v1/logs", "http://collector/otlp/v1/logs"),
    ],
)
def test_a_base_url_gets_the_logs_path(tmp_path: Path, endpoint: str, expected: str) -> None:
    export = _load(tmp_path, f"traces: {{export: {{otlp: {{endpoint: '{endpoint}'}}}}}}").export
    assert export is not None
    assert (export.endpoint, export.headers, export.timeout_s) == (expected, {}, 10.0)


@pytest.mark.parametrize(
    ("otlp", "message"),
    [
        ("{}", "traces.export.otlp.endpoint: required"),
        ("{endpoint: collector:4318}", "traces.export.otlp.endpoint: expected an http(s) URL"),
        ("{endpoint: 'ftp://c/v1/logs'}", "traces.export.otlp.endpoint: expected an http(s)"),
        ("{endpoint: 'http://c:99999'}", "traces.export.otlp.endpoint: expected a port"),
        ("{endpoint: 4318}", "traces.export.otlp.endpoint: expected an http(s) URL such"),
        ("{endpoint: 'http://c', headers: [a]}", "traces.export.otlp.headers: expected a mapping"),
        ("{endpoint: 'http://c', headers: {'a b': x}}", "headers.a b: expected an HTTP header"),
        ("{endpoint: 'http://c', headers: {k: 1}}", "headers.k: expected a string"),
        (
            "{endpoint: 'http://c', headers: {k: 'env:EVALSI_TEST_SURELY_UNSET'}}",
            "headers.k: environment variable 'EVALSI_TEST_SURELY_UNSET' is not set",
        ),
        ("{endpoint: 'http://c', timeout: 0}", "traces.export.otlp.timeout: expected a positive"),
        ("{endpoint: 'http://c', retries: 3}", "traces.export.otlp.retries: unknown field"),
    ],
)
def test_bad_export_fields_are_named(tmp_path: Path, otlp: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, f"traces: {{export: {{otlp: {otlp}}}}}")
    assert message in str(e.value)


def test_export_must_name_a_sink(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"traces.export.kafka: unknown field"):
        _load(tmp_path, "traces: {export: {kafka: {}}}")
