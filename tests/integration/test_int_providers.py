"""Azure OpenAI, Gemini and Bedrock end to end: each as a run's target, as a judge, and driving
the built-in agent through a tool call, against the stub over real HTTP; bad provider settings
refused with the spec field named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError
from evalsi.runs._execute import execute_run
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.sigv4 import KEY_ID, SECRET_KEY, TOKEN, verify_sigv4
from tests.support.stub_llm import StubLLM

BEDROCK_MODEL = "amazon.nova-lite-v1:0"
MODELS: dict[str, tuple[str, str]] = {  # connector -> (the model fields, the path it calls)
    "azure-openai": (
        "model: qa-deploy, apiVersion: 2024-10-21, secretRef: env:AZURE_OPENAI_API_KEY",
        "/openai/deployments/qa-deploy/chat/completions",
    ),
    "gemini": (
        "model: gemini-2.5-flash, secretRef: env:GEMINI_API_KEY",
        "/v1beta/models/gemini-2.5-flash:generateContent",
    ),
    "bedrock": (f"model: {BEDROCK_MODEL}, region: us-west-2", f"/model/{BEDROCK_MODEL}/converse"),
}


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _model(connector: str, url: str) -> str:
    return f'{{connector: {connector}, baseUrl: "{url}", {MODELS[connector][0]}}}'


def _data(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "input": "2+2?", "reference": "4"},
        {"id": "b", "input": "capital of France?", "reference": "Paris"},
    ]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(tmp_path: Path, text: str) -> tuple[Any, SqlStore]:
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    db = SqlStore.open(tmp_path / "s.db")
    return asyncio.run(execute_run(spec, store=db, registry=BUILTINS)), db


@pytest.mark.parametrize("connector", sorted(MODELS))
def test_each_provider_as_a_run_target(connector: str, tmp_path: Path) -> None:
    _data(tmp_path)
    spec = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: provider-{connector}}}
spec:
  target:
    model: {{}}
    system: Answer with the answer only.
  dataset: {{path: qa.jsonl}}
  evaluators: [{{ref: exact-match}}, {{ref: tokens}}]
"""
    with StubLLM(answers={"2+2?": "4", "capital of France?": "Lyon"}) as stub:
        spec = spec.replace("model: {}", "model: " + _model(connector, stub.url))
        result, db = _run(tmp_path, spec)
        requests = stub.requests(MODELS[connector][1])
    assert result.tasks == {"ok": 2}
    assert result.metric("exact-match").mean == pytest.approx(0.5)
    assert len(requests) == 2
    headers = {k.lower(): v for k, v in requests[0].headers.items()}
    if connector == "azure-openai":
        assert requests[0].query == {"api-version": "2024-10-21"}
        assert headers["api-key"] == "az-key"
    elif connector == "gemini":
        assert headers["x-goog-api-key"] == "g-key"
        assert requests[0].body["systemInstruction"] == {
            "parts": [{"text": "Answer with the answer only."}]
        }
    else:
        for request in requests:
            verify_sigv4(request, stub.url, "us-west-2")
    manifest = db.get_run(result.run_id).manifest or {}
    assert manifest["target"]["connector"] == connector
    assert "az-key" not in json.dumps(manifest)
    assert "g-key" not in json.dumps(manifest)


@pytest.mark.parametrize("connector", ["gemini", "bedrock"])
def test_a_provider_as_the_judge(connector: str, tmp_path: Path) -> None:
    _data(tmp_path)
    (tmp_path / "answer.py").write_text("def answer(q):\n    return 'I think ' + q\n")
    verdict = '{"score": 0.5, "explanation": "half right"}'
    with StubLLM(default=verdict) as judge:
        spec = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: judged-by-{connector}}}
spec:
  target: {{python: "answer:answer"}}
  dataset: {{path: qa.jsonl}}
  judges:
    default: {_model(connector, judge.url)}
  evaluators: [{{ref: llm-judge, params: {{rubric: "Is it right?"}}}}]
"""
        import sys

        sys.path.insert(0, str(tmp_path))
        try:
            result, _ = _run(tmp_path, spec)
        finally:
            sys.path.remove(str(tmp_path))
        requests = judge.requests(MODELS[connector][1])
    assert len(requests) == 2
    assert result.metric("llm-judge").mean == pytest.approx(0.5)
    if connector == "bedrock":
        verify_sigv4(requests[0], judge.url, "us-west-2")


LEDGER: list[str] = []


def balance(account: str) -> int:
    """An account's balance."""
    LEDGER.append(account)
    return {"alice": 120}.get(account, 0)


@pytest.mark.parametrize("connector", ["gemini", "bedrock"])
def test_an_agent_calls_a_tool_through_the_provider(connector: str, tmp_path: Path) -> None:
    LEDGER.clear()
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "ask", "input": "what does alice have?", "reference": "Alice has 120."})
        + "\n"
    )
    script: dict[str, Any] = {
        "tool_calls": {
            "what does alice have?": [{"name": "balance", "arguments": {"account": "alice"}}]
        },
        "answers": {"120": "Alice has 120."},
    }
    with StubLLM(**script) as stub:
        spec = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: agent-{connector}}}
spec:
  target:
    agent:
      model: {_model(connector, stub.url)}
      maxSteps: 4
  environment:
    tools: [{{function: "{__name__}:balance"}}]
  dataset: {{path: tasks.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""
        result, db = _run(tmp_path, spec)
        first, second = (r.body for r in stub.requests(MODELS[connector][1]))
    assert result.tasks == {"ok": 1}
    assert LEDGER == ["alice"]
    assert result.metric("exact-match").mean == 1.0
    if connector == "gemini":
        (declared,) = first["tools"][0]["functionDeclarations"]
        assert declared["name"] == "balance"
        assert declared["parametersJsonSchema"]["required"] == ["account"]
        assert second["contents"][1] == {
            "role": "model",
            "parts": [{"functionCall": {"name": "balance", "args": {"account": "alice"}}}],
        }
        assert second["contents"][2] == {
            "role": "user",
            "parts": [{"functionResponse": {"name": "balance", "response": {"result": 120}}}],
        }
    else:
        (tool,) = first["toolConfig"]["tools"]
        assert tool["toolSpec"]["name"] == "balance"
        assert tool["toolSpec"]["inputSchema"]["json"]["required"] == ["account"]
        assert second["messages"][1]["content"] == [
            {
                "toolUse": {
                    "toolUseId": "tooluse_0",
                    "name": "balance",
                    "input": {"account": "alice"},
                }
            }
        ]
        assert second["messages"][2]["content"] == [
            {"toolResult": {"toolUseId": "tooluse_0", "content": [{"text": "120"}]}}
        ]
    from evalsi.runs import iter_tasks

    (task,) = iter_tasks(db, result.run_id, 10)
    steps = task["trajectory"]["steps"]
    assert [s["type"] for s in steps] == ["model_call", "tool_call", "model_call"]
    assert steps[1]["result"] == 120


@pytest.mark.parametrize(
    ("model", "where", "expected"),
    [
        (
            "{connector: azure-openai, baseUrl: https://r.openai.azure.com, model: d}",
            "spec.target.model",
            "missing required field 'apiVersion'",
        ),
        (
            "{connector: azure-openai, baseUrl: https://r.openai.azure.com/openai/deployments/d, "
            "model: d, apiVersion: 2024-10-21}",
            "spec.target.model.baseUrl",
            "expected the resource endpoint alone, without a path or query",
        ),
        (
            "{connector: bedrock, model: m, region: us-middle-9}",
            "spec.target.model.region",
            "unknown AWS region 'us-middle-9'",
        ),
        ("{connector: bedrock, model: m}", "spec.target.model", "missing required field 'region'"),
        (
            "{connector: gemini, model: m, region: us-east-1}",
            "spec.target.model.region",
            "the gemini connector takes no region",
        ),
        (
            "{connector: anthropic, model: m, auth: bearer, secretRef: env:K}",
            "spec.target.model.auth",
            "the anthropic connector sends its key its own way",
        ),
        (
            "{connector: gemini, model: m, auth: bearer}",
            "spec.target.model.auth",
            "a bearer token needs a secretRef",
        ),
    ],
)
def test_bad_provider_settings_name_the_field(
    model: str, where: str, expected: str, tmp_path: Path
) -> None:
    _data(tmp_path)
    spec = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: bad}}
spec:
  target: {{model: {model}}}
  dataset: {{path: qa.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""
    with pytest.raises(SpecError) as e:
        run_spec_from_yaml(spec, base_dir=tmp_path)
    assert f"{where}: {expected}" in str(e.value)


def test_an_entra_id_token_from_the_spec_goes_as_bearer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _data(tmp_path)
    monkeypatch.setenv("AZURE_AD_TOKEN", "eyJ-entra")
    with StubLLM(require_key="eyJ-entra") as stub:
        spec = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: azure-entra}}
spec:
  target:
    model:
      connector: azure-openai
      baseUrl: "{stub.url}"
      model: qa-deploy
      apiVersion: "2024-10-21"
      auth: bearer
      secretRef: env:AZURE_AD_TOKEN
  dataset: {{path: qa.jsonl}}
  evaluators: [{{ref: exact-match}}]
"""
        result, _ = _run(tmp_path, spec)
        (first, _second) = stub.requests(MODELS["azure-openai"][1])
    assert result.tasks == {"ok": 2}
    assert first.headers["Authorization"] == "Bearer eyJ-entra"
    assert "api-key" not in {k.lower() for k in first.headers}


def test_a_simulated_user_speaks_through_a_provider(tmp_path: Path) -> None:
    from evalsi.connectors import Gemini
    from evalsi.runs._user_sim import build_user_simulator
    from evalsi.specs import UserSimulatorSpec

    spec = UserSimulatorSpec(
        connector="gemini", model="gemini-2.5-flash", secret_ref="env:GEMINI_API_KEY", goal="g"
    )
    simulator = build_user_simulator(spec)
    assert isinstance(simulator.model, Gemini)
    assert simulator.model.base_url == "https://generativelanguage.googleapis.com"
