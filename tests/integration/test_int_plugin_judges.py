"""A plugin's evaluator judged by the run's own judge: the judged test plugin
(tests/fixtures/plugins/judged-plugin, plain httpx) in a plugin process, the run's judge the
loopback stub LLM, the host serving that judge to the plugin as an OpenAI-compatible endpoint
(``JudgeProxy``) through evalsi's judge layer; and the endpoint's refusals, tried over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import evalsi
from evalsi.core import Outcome
from evalsi.evaluators import JudgeClient, Registry
from evalsi.plugins import JudgeProxy, PluginHost
from evalsi.runs import build_judges, execute_run, without_cache
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.plugins import install_to_folder, started_plugin
from tests.support.stub_llm import ANTHROPIC_PATH, OPENAI_PATH, Fault, StubLLM

PACKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "plugins" / "judged-plugin"
ROWS = [{"id": "a", "input": "Capital of France?", "output": "Paris"}]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PluginHost, Registry]]:
    site = install_to_folder(
        PACKAGE, tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("build")
    )
    host, registry = started_plugin(PACKAGE, "judged", site)
    yield host, registry
    host.close()


def _openai_judge(stub: StubLLM) -> dict[str, Any]:
    return {"default": {"connector": "openai-compatible", "baseUrl": stub.openai_url,
                        "model": "judge-model"}}  # fmt: skip


def _grade(registry: Registry, judges: Any, store: Path, **params: Any) -> Any:
    return evalsi.evaluate(
        ROWS,
        evaluators=["judged/verdict"],
        params={"judged/verdict": params} if params else None,
        judges=judges,
        registry=registry,
        store=str(store),
    )


def _account(store: Path, run_id: str) -> dict[str, Any]:
    run = SqlStore.open(store).get_run(run_id)
    assert run.summary is not None
    return run.summary["judges"]["default"]  # type: ignore[no-any-return]


def test_the_runs_judge_answers_the_plugin_once_then_from_the_cache(
    judged: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, registry = judged
    store = tmp_path / "s.db"
    with StubLLM(default="yes, it answers") as stub:
        cold = _grade(registry, _openai_judge(stub), store)
        cold_calls = stub.calls(OPENAI_PATH)
        sent = stub.requests(OPENAI_PATH)[0].body
        warm = _grade(registry, _openai_judge(stub), store)
        warm_calls = stub.calls(OPENAI_PATH) - cold_calls
    assert cold_calls == 1
    assert warm_calls == 0  # the second run was answered from the judge cache
    # the judge's own connector made the call: its model, the plugin's messages
    assert sent["model"] == "judge-model"
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert "Capital of France?" in sent["messages"][1]["content"]
    for result, cache in ((cold, "miss"), (warm, "hit")):
        [r] = result.results
        assert r.outcome is Outcome.SCORED, r.reason
        assert r.scores[0].value is True
        assert r.scores[0].explanation == "yes, it answers"
        assert r.scores[0].metadata["cache"] == cache
        assert r.scores[0].metadata["model"] == "judge-model"
    # the plugin's judge call is in the run's judge usage, as an evaluator's in process
    account = _account(store, cold.run_id)
    assert account["calls"] == 1
    assert account["tokens"] > 0
    assert account["tokens"] == cold.results[0].scores[0].metadata["tokens"]
    warm_account = _account(store, warm.run_id)
    assert (warm_account["calls"], warm_account["cached"], warm_account["tokens"]) == (0, 1, 0)


def test_an_anthropic_judge_serves_a_plugin_that_speaks_openai(
    judged: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, registry = judged
    with StubLLM(default="no, that is wrong") as stub:
        judges = {"default": {"connector": "anthropic", "baseUrl": stub.url, "model": "claude-j"}}
        result = _grade(registry, judges, tmp_path / "s.db")
        assert stub.calls(ANTHROPIC_PATH) == 1
        assert stub.calls(OPENAI_PATH) == 0
        sent = stub.requests(ANTHROPIC_PATH)[0].body
    [r] = result.results
    assert r.outcome is Outcome.SCORED, r.reason
    assert r.scores[0].value is False
    assert r.scores[0].explanation == "no, that is wrong"
    assert sent["model"] == "claude-j"
    assert "Answer yes or no." in str(sent["system"])  # the system turn, as Anthropic takes it
    assert _account(tmp_path / "s.db", result.run_id)["calls"] == 1


def test_a_judge_the_run_lacks_is_an_error_naming_it(
    judged: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, registry = judged
    with StubLLM(default="yes") as stub:
        named = _grade(registry, _openai_judge(stub), tmp_path / "s.db", judge="strict")
        unjudged = _grade(registry, None, tmp_path / "s.db")
        assert stub.calls() == 0
    for result, name in ((named, "strict"), (unjudged, "default")):
        [r] = result.results
        assert r.outcome is Outcome.ERROR
        assert r.reason.startswith(f"the run has no judge named {name!r}")


def test_an_answer_the_plugin_failed_on_is_not_cached(
    judged: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, registry = judged
    with StubLLM(default="maybe") as stub:
        first = _grade(registry, _openai_judge(stub), tmp_path / "s.db")
        _grade(registry, _openai_judge(stub), tmp_path / "s.db")
        assert stub.calls(OPENAI_PATH) == 2  # asked again: the malformed verdict was not kept
    [r] = first.results
    assert r.outcome is Outcome.ERROR
    assert "not a verdict" in r.reason


def test_a_lost_judge_is_infrastructure_not_the_records_fault(
    judged: tuple[PluginHost, Registry], tmp_path: Path
) -> None:
    _, registry = judged
    with StubLLM(default="yes") as stub:
        # the judge keeps answering 503: its connector retries, then its breaker opens
        stub.schedule(*[Fault(status=503, retry_after="0")] * 40, path=OPENAI_PATH)
        result = _grade(registry, _openai_judge(stub), tmp_path / "s.db")
    [r] = result.results
    assert r.outcome is Outcome.ERROR
    assert r.reason.startswith("infra_error(server_error): judge 'default': ")
    metric = result.metric("verdict")
    assert (metric.n, metric.errors, metric.infra_errors) == (0, 0, 1)


# -- the endpoint's refusals ---------------------------------------------------------------------
LIMIT = 64 * 1024
GOOD = {"model": "m", "messages": [{"role": "user", "content": "Is it?"}]}
IMAGE = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}


async def _chunks(size: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < size:
        yield b"x" * 8192
        sent += 8192


async def _refusals(judge: JudgeClient) -> dict[str, tuple[int, str]]:
    got: dict[str, tuple[int, str]] = {}
    async with JudgeProxy(judge, "default", max_body=LIMIT) as proxy, aiohttp.ClientSession() as s:
        url = f"{proxy.endpoint.base_url}/chat/completions"
        auth = {"Authorization": f"Bearer {proxy.endpoint.api_key}"}
        port = url.split(":")[2].split("/")[0]
        tries: dict[str, dict[str, Any]] = {
            "good": {"headers": auth, "json": GOOD},
            "no token": {"json": GOOD},
            "wrong token": {"headers": {"Authorization": "Bearer nope"}, "json": GOOD},
            "origin": {"headers": {**auth, "Origin": "https://evil.example"}, "json": GOOD},
            "host": {"headers": {**auth, "Host": f"evil.example:{port}"}, "json": GOOD},
            "long body": {"headers": auth, "data": b"{" + b" " * (LIMIT + 1) + b"}"},
            "chunked body": {"headers": auth, "data": _chunks(LIMIT * 4)},
            "stream": {"headers": auth, "json": {**GOOD, "stream": True}},
            "no messages": {"headers": auth, "json": {"model": "m"}},
            "image": {"headers": auth, "json": {**GOOD, "messages": [IMAGE]}},
        }
        for name, kwargs in tries.items():
            async with s.post(url, **kwargs) as response:
                body = await response.json(content_type=None)
                got[name] = (response.status, str(body.get("error", {}).get("message", "")))
        assert proxy.calls == 1
    async with aiohttp.ClientSession() as s:  # served for the batch only
        with pytest.raises(aiohttp.ClientConnectionError):
            await s.post(url, headers=auth, json=GOOD)
    return got


def test_the_endpoint_refuses_other_callers_and_unbounded_bodies(tmp_path: Path) -> None:
    with StubLLM(default="yes") as stub:
        specs = without_cache(_openai_judge(stub))
        judge = build_judges(specs, SqlStore.open(tmp_path / "s.db"), [])["default"]
        got = asyncio.run(_refusals(judge))
        assert stub.calls() == 1  # only the good request reached the judge
    assert got["good"][0] == 200
    assert got["no token"][0] == got["wrong token"][0] == 401
    assert got["origin"] == (403, "requests from web pages are refused")
    assert got["host"][0] == 421
    assert got["long body"][0] == got["chunked body"][0] == 413
    assert got["stream"] == (400, "streaming is not served: send stream false")
    assert got["no messages"] == (400, "messages must be a non-empty list")
    assert got["image"] == (400, "messages[0].content[0]: only text parts are served")


RUN = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: plugin-judged}}
spec:
  target: {{python: "pluginjudged_target:answer"}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 1
  evaluators: [{{ref: judged/verdict}}]
  judges:
    default: {{connector: openai-compatible, baseUrl: "{judge}", model: j, maxConcurrency: 1}}
  budget: {{tokens: 200}}
"""


def test_a_plugins_judge_calls_count_against_a_runs_budget(
    judged: tuple[PluginHost, Registry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, registry = judged
    (tmp_path / "qa.jsonl").write_text(
        "".join(f'{{"id": "s{i}", "input": "q{i}"}}\n' for i in range(60))
    )
    (tmp_path / "pluginjudged_target.py").write_text("def answer(text):\n    return text + '!'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with StubLLM(default="yes") as stub:
        spec = run_spec_from_yaml(RUN.format(judge=stub.openai_url), base_dir=tmp_path)
        result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=registry))
        calls = stub.calls(OPENAI_PATH)
    # the Python target reports no tokens: only the plugin's judge calls can spend the budget
    assert result.status == "stopped"
    assert result.stopped_reason is not None
    assert result.stopped_reason.startswith("budget(tokens)")
    assert calls > 0
    # a plugin grades whole batches, so the tasks ran already; the stop still came from them
    assert _account(tmp_path / "s.db", result.run_id)["tokens"] > 200
