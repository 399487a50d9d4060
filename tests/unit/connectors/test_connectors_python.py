"""Python callables as targets: sync in a thread, async on the loop, errors per sample."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from evalsi.connectors import InfraError, PythonTarget, TargetError, load_callable
from evalsi.core import Content, Message, UserError
from tests.support.aio import run

MODULE = "evalsi_test_target_module"


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    mod = ModuleType(MODULE)

    def shout(text: str) -> str:
        mod.thread = threading.current_thread().name  # type: ignore[attr-defined]
        return text.upper()

    async def reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await asyncio.sleep(0)
        return [*messages, {"role": "assistant", "content": "pong"}]

    def broken(text: str) -> str:
        raise ValueError(f"cannot handle {text!r}")

    def as_json(value: Any) -> dict[str, Any]:
        return {"got": value}

    def slow(text: str) -> str:
        time.sleep(0.5)
        return text

    class Agent:
        async def __call__(self, text: str) -> str:
            return f"agent:{text}"

        class Nested:
            @staticmethod
            def run(text: str) -> str:
                return f"nested:{text}"

    mod.shout = shout  # type: ignore[attr-defined]
    mod.reply = reply  # type: ignore[attr-defined]
    mod.broken = broken  # type: ignore[attr-defined]
    mod.as_json = as_json  # type: ignore[attr-defined]
    mod.slow = slow  # type: ignore[attr-defined]
    mod.agent = Agent()  # type: ignore[attr-defined]
    mod.Agent = Agent  # type: ignore[attr-defined]
    mod.NOT_CALLABLE = 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, MODULE, mod)
    return mod


def test_sync_callable_runs_in_a_worker_thread(module: ModuleType) -> None:
    out = run(PythonTarget(f"{MODULE}:shout").invoke(Content.of_text("hi")))
    assert out.output == Content.of_text("HI")
    assert out.usage.latency_ms is not None
    assert module.thread != threading.main_thread().name


def test_async_callable_gets_messages_and_returns_messages(module: ModuleType) -> None:
    target = PythonTarget(f"{MODULE}:reply")
    out = run(target.invoke([Message(role="user", content="ping")]))
    assert out.output.kind == "messages"
    assert out.output.as_text() == "pong"


def test_async_callable_object_and_nested_attribute(module: ModuleType) -> None:
    assert run(PythonTarget(f"{MODULE}:agent").invoke("x")).output.text == "agent:x"
    assert run(PythonTarget(f"{MODULE}:Agent.Nested.run").invoke("y")).output.text == "nested:y"


def test_json_input_and_output(module: ModuleType) -> None:
    out = run(PythonTarget(f"{MODULE}:as_json").invoke(Content.of_json({"a": 1})))
    assert out.output == Content.of_json({"got": {"a": 1}})


def test_a_raising_callable_is_a_target_error(module: ModuleType) -> None:
    with pytest.raises(TargetError, match=r"raised ValueError: cannot handle 'boom'") as caught:
        run(PythonTarget(f"{MODULE}:broken").invoke("boom"))
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_callable_that_overruns_its_timeout_is_an_infra_timeout(module: ModuleType) -> None:
    with pytest.raises(InfraError) as caught:
        run(PythonTarget(f"{MODULE}:slow", timeout=0.05).invoke("x"))
    assert caught.value.kind == "timeout"


def test_a_plain_callable_can_be_passed_directly() -> None:
    async def double(text: str) -> str:
        return text * 2

    target = PythonTarget(double)
    assert run(target.invoke("ab")).output.text == "abab"
    assert target.describe()["connector"] == "python"
    assert "double" in target.describe()["ref"]


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_colon", "not of the form module:function"),
        ("evalsi_no_such_module_xyz:f", "cannot import module"),
        (f"{MODULE}:missing", "has no attribute 'missing'"),
        (f"{MODULE}:NOT_CALLABLE", "is not callable"),
    ],
)
def test_bad_references_are_user_errors(module: ModuleType, ref: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        PythonTarget(ref)


def test_load_callable_from_a_file_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evalsi_tmp_app.py").write_text("def answer(q):\n    return 'A:' + q\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "evalsi_tmp_app", raising=False)
    assert load_callable("evalsi_tmp_app:answer")("q") == "A:q"
