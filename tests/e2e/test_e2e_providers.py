"""The provider examples (examples/providers/) as a user runs them: each plans with
``--dry-run`` as written, and runs with ``evalsi run`` against the loopback stub speaking its
wire format (only the address changed), sending what that provider expects."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.sigv4 import KEY_ID, SECRET_KEY, TOKEN, verify_sigv4
from tests.support.stub_llm import OPENAI_PATH, StubLLM

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROVIDERS = EXAMPLES / "providers"
ENV = {
    "AZURE_OPENAI_API_KEY": "az-key",
    "GEMINI_API_KEY": "g-key",
    "AWS_ACCESS_KEY_ID": KEY_ID,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_SESSION_TOKEN": TOKEN,
    "AWS_EC2_METADATA_DISABLED": "true",
}
# example -> the path its requests take on the stub
PATHS = {
    "azure-openai": "/openai/deployments/gpt-4o-mini/chat/completions",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    "bedrock": "/model/us.amazon.nova-lite-v1:0/converse",
    "vllm": OPENAI_PATH,
    "ollama": OPENAI_PATH,
    "llamacpp": OPENAI_PATH,
}


def test_every_provider_example_is_tested() -> None:
    assert sorted(p.stem for p in PROVIDERS.glob("*.yaml")) == sorted(PATHS)


def _env(tmp_path: Path) -> dict[str, str]:
    none = str(tmp_path / "no-aws-files")
    return {**ENV, "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_the_example_plans_as_written(
    name: str, run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    spec = PROVIDERS / f"{name}.yaml"
    plan = run_evalsi(tmp_path, "run", "-f", spec, "--dry-run", env=_env(tmp_path))
    assert plan.returncode == 0, plan.stderr
    assert f"plan for qa-{name}" in plan.stdout
    assert "5 (5 samples x 1 trials)" in plan.stdout


def _pointed_at(text: str, name: str, stub: StubLLM) -> str:
    """The example with only its address changed to the stub's."""
    if name in ("gemini", "bedrock"):  # their default address is the provider's
        return re.sub(r"(connector: \S+)", rf"\1\n      baseUrl: {stub.url}", text, count=1)
    root = stub.url if name == "azure-openai" else stub.openai_url
    return re.sub(r"baseUrl: \S+", f"baseUrl: {root}", text, count=1)


@pytest.mark.parametrize("name", sorted(PATHS))
def test_the_example_runs_against_its_wire_format(
    name: str, run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES / "qa.jsonl", tmp_path / "qa.jsonl")
    (tmp_path / "providers").mkdir()
    spec = tmp_path / "providers" / f"{name}.yaml"
    with StubLLM(answers={"What is 2 + 2?": "4"}) as stub:
        spec.write_text(_pointed_at((PROVIDERS / f"{name}.yaml").read_text(), name, stub))
        done = run_evalsi(tmp_path, "run", "-f", spec, "--format", "json", env=_env(tmp_path))
        requests = stub.requests(PATHS[name])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "done"
    assert len(requests) == 5
    em = next(m for m in out["metrics"] if m["metric"] == "exact-match")
    assert (em["n"], em["mean"]) == (5, pytest.approx(0.2))  # the stub knows one answer
    headers = {k.lower(): v for k, v in requests[0].headers.items()}
    if name == "azure-openai":
        assert requests[0].query == {"api-version": "2024-10-21"}
        assert headers["api-key"] == "az-key"
        assert "authorization" not in headers
    elif name == "gemini":
        assert headers["x-goog-api-key"] == "g-key"
        assert requests[0].body["generationConfig"]["maxOutputTokens"] == 64
    elif name == "bedrock":
        for request in requests:
            verify_sigv4(request, stub.url, "us-east-1")
        assert requests[0].body["inferenceConfig"] == {"temperature": 0, "maxTokens": 64}
    else:  # the local servers: no key is sent
        assert "authorization" not in headers
        assert requests[0].body["max_tokens"] == 64


def test_a_missing_key_is_named_before_any_call(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    env = {k: v for k, v in _env(tmp_path).items() if k != "GEMINI_API_KEY"}
    plan = run_evalsi(tmp_path, "run", "-f", PROVIDERS / "gemini.yaml", "--dry-run", env=env)
    assert plan.returncode == 2
    assert "environment variable GEMINI_API_KEY is not set" in plan.stderr
    assert "Traceback" not in plan.stderr
