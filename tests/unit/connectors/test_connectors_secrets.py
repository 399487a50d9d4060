"""Secrets are referenced, resolved late, and never shown: repr, str, errors, describe."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from evalsi.connectors import (
    Anthropic,
    HttpTarget,
    InfraError,
    OpenAICompatible,
    Resilience,
    RetryPolicy,
    Secret,
    Target,
    TargetError,
    resolve_secret,
)
from evalsi.core import UserError
from tests.support.aio import run
from tests.support.stub_llm import StubLLM

VALUE = "sk-live-0123456789abcdef"


def test_env_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_KEY", VALUE)
    secret = resolve_secret("env:EVALSI_TEST_KEY")
    assert secret.reveal() == VALUE
    assert secret.ref == "env:EVALSI_TEST_KEY"


def test_file_reference_drops_the_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(VALUE + "\n")
    assert resolve_secret(f"file:{path}").reveal() == VALUE


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("env:EVALSI_SURELY_UNSET_VAR", "environment variable EVALSI_SURELY_UNSET_VAR is not set"),
        ("file:/nonexistent/evalsi/key", "cannot read /nonexistent/evalsi/key"),
        ("vault:x", "unknown scheme 'vault'"),
        ("OPENAI_API_KEY", "not of the form env:NAME or file:PATH"),
        ("env:", "not of the form"),
    ],
)
def test_missing_or_bad_references_are_user_errors_naming_the_ref(
    ref: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVALSI_SURELY_UNSET_VAR", raising=False)
    with pytest.raises(UserError, match=message) as caught:
        resolve_secret(ref)
    assert ref in str(caught.value)


def test_an_empty_secret_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_text("\n")
    with pytest.raises(UserError, match="is empty"):
        resolve_secret(f"file:{path}")


def test_the_value_never_shows() -> None:
    secret = Secret(VALUE, ref="env:K")
    for text in (
        repr(secret),
        str(secret),
        f"{secret}",
        f"{secret!r}",
        f"{secret:>40}",
        "%s" % (secret,),  # noqa: UP031 - the old formatting path too
    ):
        assert VALUE not in text
    assert repr(secret) == "Secret('env:K')"
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(secret)
    assert secret.redact(f"bad key {VALUE}!") == "bad key ***!"


def test_connectors_show_the_reference_only() -> None:
    secret = Secret(VALUE, ref="env:K")
    targets: list[Target] = [
        OpenAICompatible("http://h/v1", "m", api_key=secret),
        Anthropic("http://h", "m", api_key=secret),
        HttpTarget("http://h/x", headers={"Authorization": secret}),
    ]
    for target in targets:
        assert VALUE not in repr(target)
        assert VALUE not in str(target.describe())
    assert targets[0].describe()["secret_ref"] == "env:K"
    assert targets[2].describe()["secret_refs"] == ["env:K"]
    assert VALUE not in repr(OpenAICompatible("http://h/v1", "m", api_key=VALUE))


def test_errors_never_carry_the_key(stub_llm: StubLLM) -> None:
    stub_llm.configure({"require_key": "other"})
    client = OpenAICompatible(
        stub_llm.openai_url,
        "m",
        api_key=Secret(VALUE, ref="env:K"),
        resilience=Resilience(retry=RetryPolicy(max_attempts=1)),
    )
    with pytest.raises(TargetError) as caught:
        run(client.complete("hi"))
    assert VALUE not in str(caught.value)
    assert VALUE not in repr(caught.value)


def test_a_server_echoing_the_key_is_redacted(stub_llm: StubLLM) -> None:
    # The stub echoes the JSON "input" into its answer; make it answer with an error that
    # quotes the Authorization header, as some proxies do.
    stub_llm.configure({"default": f"rejected key {VALUE}"})
    target = HttpTarget(
        stub_llm.url + "/svc/echo?token=abc",
        body={"input": "{{input}}"},
        output="$.missing",
        headers={"Authorization": Secret(VALUE, ref="file:/run/k")},
        resilience=Resilience(retry=RetryPolicy(max_attempts=1)),
    )
    with pytest.raises(TargetError) as caught:
        run(target.invoke("hi"))
    assert "token=abc" not in str(caught.value)  # query strings may hold credentials too

    stub_llm.schedule(None)
    stub_llm.configure({"default": "x"})
    bad = HttpTarget(
        stub_llm.url + "/svc/echo",
        headers={"X-Stub-Fault": '{"status": 503}', "Authorization": Secret(VALUE, ref="env:K")},
        resilience=Resilience(retry=RetryPolicy(max_attempts=1)),
    )
    with pytest.raises(InfraError) as infra:
        run(bad.invoke("hi"))
    assert VALUE not in str(infra.value)


def test_error_detail_from_the_server_is_redacted() -> None:
    from evalsi.connectors._http import _error_detail

    secret = Secret(VALUE)
    body = b'{"error": {"message": "Incorrect API key provided: ' + VALUE.encode() + b'"}}'
    assert _error_detail(body, (secret,)) == "Incorrect API key provided: ***"
    assert _error_detail(b"raw " + VALUE.encode(), (secret,)) == "raw ***"
