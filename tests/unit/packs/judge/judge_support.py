"""Helpers for the judge-pack tests: a judge config pointing at the stub, a fake judge."""

from __future__ import annotations

from typing import Any

from evalsi.core import Message, Usage
from evalsi.evaluators import JudgeReply


def stub_judges(base_url: str, **params: Any) -> dict[str, dict[str, Any]]:
    """``judges=`` for ``evalsi.evaluate``: one ``default`` judge on the stub."""
    return {
        "default": {
            "connector": "openai-compatible",
            "baseUrl": base_url,
            "model": "judge-model",
            "params": {"temperature": 0, **params},
        }
    }


class ScriptedJudge:
    """A fake ``JudgeClient`` answering from a list, recording what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[list[Message]] = []

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, template: str = ""
    ) -> JudgeReply:
        self.asked.append(list(messages))
        text = self.answers[min(len(self.asked), len(self.answers)) - 1]
        return JudgeReply(text, Usage(input_tokens=10, output_tokens=5, total_tokens=15))

    def identity(self) -> dict[str, Any]:
        return {"model": "scripted"}
