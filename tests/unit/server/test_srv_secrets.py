"""Secret references in run specs sent to a server: file: never, env: only where allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError, UserError
from evalsi.packs import builtin_registry
from evalsi.server._config import load_config
from evalsi.server._run_manager import RunManager
from evalsi.server._runs import RunHandler
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from tests.support.run_server_main import run_doc, run_message


def _handler(tmp_path: Path, allowed: tuple[str, ...]) -> RunHandler:
    (tmp_path / "qa.jsonl").write_text('{"id": "1", "input": "q", "reference": "a"}\n')
    config = ServerConfig(
        datasets_dir=tmp_path, data_dir=tmp_path, store=":memory:", allowed_env_secrets=allowed
    )
    state = ServerState(config=config, store=SqlStore.open(":memory:"), registry=builtin_registry())
    state.runs = RunManager(state)
    return RunHandler(state)


def _doc(secret: str, *, judge: bool = False) -> dict[str, Any]:
    doc = run_doc("http://127.0.0.1:9/v1", "qa.jsonl")
    if judge:
        doc["spec"]["judges"] = {
            "default": {
                "connector": "openai-compatible",
                "baseUrl": "http://127.0.0.1:9/v1",
                "model": "m",
                "secretRef": secret,
            }
        }
    else:
        doc["spec"]["target"]["model"]["secretRef"] = secret
    return doc


def test_an_env_secret_the_server_lends_is_accepted(tmp_path: Path) -> None:
    spec = _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(
        run_message(_doc("env:OPENAI_API_KEY"))
    )
    assert spec.target.kind == "model"


@pytest.mark.parametrize("judge", [False, True])
def test_any_other_env_secret_is_refused_naming_the_place(tmp_path: Path, judge: bool) -> None:
    handler = _handler(tmp_path, ("OPENAI_API_KEY",))
    with pytest.raises(UserError) as caught:
        handler.spec_from_request(run_message(_doc("env:AWS_SECRET_ACCESS_KEY", judge=judge)))
    where = "spec.judges.default.secretRef" if judge else "spec.target.model.secretRef"
    assert caught.value.message.startswith(f"{where}: env:AWS_SECRET_ACCESS_KEY is not a secret")
    assert "OPENAI_API_KEY" in caught.value.message


def test_no_env_secret_is_lent_by_default(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"lists: none"):
        _handler(tmp_path, ()).spec_from_request(run_message(_doc("env:HOME")))


def test_file_secrets_stay_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="file: secret references are refused"):
        _handler(tmp_path, ("X",)).spec_from_request(run_message(_doc("file:/etc/passwd")))


def test_config_reads_and_checks_allow_env(tmp_path: Path) -> None:
    good = tmp_path / "evalsi.yaml"
    good.write_text("secrets:\n  allowEnv: [OPENAI_API_KEY, ANTHROPIC_API_KEY]\n")
    assert load_config(good).allowed_env_secrets == ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    bad = tmp_path / "bad.yaml"
    bad.write_text("secrets:\n  allowEnv: [OK, 'not a name']\n  other: 1\n")
    with pytest.raises(SpecError) as caught:
        load_config(bad)
    assert "secrets.allowEnv[1]: expected a variable name" in caught.value.message
    assert "secrets.other: unknown key" in caught.value.message


def _bedrock(doc: dict[str, Any], place: str, **fields: str) -> dict[str, Any]:
    model = {"connector": "bedrock", "model": "amazon.nova-lite-v1:0", "region": "us-east-1"}
    model.update(fields)
    if place == "judge":
        doc["spec"]["judges"] = {"default": model}
    else:
        doc["spec"]["target"] = {"model": model}
    return doc


@pytest.mark.parametrize("place", ["target", "judge"])
def test_bedrock_on_the_servers_own_aws_credentials_is_refused_unless_lent(
    tmp_path: Path, place: str
) -> None:
    doc = _bedrock(run_doc("http://127.0.0.1:9/v1", "qa.jsonl"), place)
    with pytest.raises(UserError) as caught:
        _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc))
    where = "spec.judges.default" if place == "judge" else "spec.target.model"
    assert caught.value.message.startswith(f"{where}: a bedrock model without a secretRef")
    # lent by the operator: accepted
    spec = _handler(tmp_path, ("AWS_SECRET_ACCESS_KEY",)).spec_from_request(run_message(doc))
    assert spec.name


def test_a_bedrock_api_key_the_server_lends_is_accepted(tmp_path: Path) -> None:
    doc = _bedrock(run_doc("http://127.0.0.1:9/v1", "qa.jsonl"), "target", secretRef="env:BRK")
    spec = _handler(tmp_path, ("BRK",)).spec_from_request(run_message(doc))
    assert spec.target.connector == "bedrock"


def test_an_agents_model_secret_is_checked_too(tmp_path: Path) -> None:
    doc = run_doc("http://127.0.0.1:9/v1", "qa.jsonl")
    model = dict(doc["spec"]["target"]["model"], secretRef="env:AWS_SECRET_ACCESS_KEY")
    doc["spec"]["target"] = {"agent": {"model": model}}
    doc["spec"]["environment"] = {"tools": [{"sandbox": {"tools": ["exec"]}}]}
    with pytest.raises(UserError) as caught:
        _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc))
    assert caught.value.message.startswith("spec.target.agent.model.secretRef: env:AWS_SECRET")


def _agent_doc(kind: str, section: dict[str, Any]) -> dict[str, Any]:
    doc = run_doc("http://127.0.0.1:9/v1", "qa.jsonl")
    doc["spec"]["target"] = {"agent": {"kind": kind, kind: section}}
    return doc


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        (
            _agent_doc("http", {"url": "http://127.0.0.1:9/a", "output": "$.a",
                                "headers": {"x-leak": "file:/etc/hostname"}}),
            "spec.target.agent.http.headers.x-leak",
        ),
        (
            _agent_doc("a2a", {"url": "http://127.0.0.1:9/a",
                               "headers": {"authorization": "env:PATH"}}),
            "spec.target.agent.a2a.headers.authorization",
        ),
        (
            _agent_doc("responses", {"baseUrl": "http://127.0.0.1:9/v1", "model": "m",
                                     "secretRef": "env:HOME"}),
            "spec.target.agent.responses.secretRef",
        ),
    ],
)  # fmt: skip
def test_every_secret_reference_of_a_spec_is_checked(
    tmp_path: Path, doc: dict[str, Any], where: str
) -> None:
    """The agent connectors read env:/file: header values and their own secretRef: a request
    must not name what the server holds (a file, a variable it does not lend)."""
    with pytest.raises(UserError) as caught:
        _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc))
    assert caught.value.message.startswith(where)


def test_a_sinks_secret_is_checked_too(tmp_path: Path) -> None:
    doc = _doc("env:OPENAI_API_KEY")
    doc["spec"]["sinks"] = [{"webhook": {"url": "http://127.0.0.1:9/h", "secretRef": "file:/k"}}]
    with pytest.raises(UserError, match=r"spec.sinks\[0\].webhook.secretRef: file: secret"):
        _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc))


@pytest.mark.parametrize(
    ("sink", "key"),
    [
        ({"langfuse": {"host": "http://127.0.0.1:9", "publicKey": "pk-lf-1",
                       "secretKeyRef": "env:AWS_SECRET_ACCESS_KEY"}}, "langfuse.secretKeyRef"),
        ({"langsmith": {"endpoint": "http://127.0.0.1:9",
                        "apiKeyRef": "env:AWS_SECRET_ACCESS_KEY"}}, "langsmith.apiKeyRef"),
    ],
)  # fmt: skip
def test_langfuse_and_langsmith_keys_are_held_to_the_lent_variables(
    tmp_path: Path, sink: dict[str, Any], key: str
) -> None:
    doc = _doc("env:OPENAI_API_KEY")
    doc["spec"]["sinks"] = [sink]
    with pytest.raises(UserError) as caught:
        _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc))
    assert caught.value.message.startswith(f"spec.sinks[0].{key}: env:AWS_SECRET_ACCESS_KEY")
    doc["spec"]["sinks"] = [
        {k: {**v, key.split(".")[1]: "env:OPENAI_API_KEY"} for k, v in sink.items()}
    ]
    assert _handler(tmp_path, ("OPENAI_API_KEY",)).spec_from_request(run_message(doc)).sinks
