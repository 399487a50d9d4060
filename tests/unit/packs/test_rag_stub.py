"""The rag judge metrics over real HTTP: ``evalsi.evaluate`` on the example dataset with the
loopback stub LLM as the judge, scripted per prompt (a verdict per record, one repair, one
answer that never parses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import Outcome, Record
from evalsi.datasets import FieldMap, record_from_dict
from evalsi.packs.judge import REPAIR_PROMPT
from evalsi.packs.rag._chunks import passages_block
from evalsi.packs.rag._grounding import FAITHFULNESS_TEMPLATE
from tests.support.stub_llm import OPENAI_PATH, StubLLM

DATA = Path(__file__).resolve().parents[3] / "examples" / "rag" / "rag.jsonl"


def records() -> dict[str, Record]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    return {
        r.id: r
        for r in (
            record_from_dict(row, FieldMap(), line=i, path=str(DATA))
            for i, row in enumerate(rows, 1)
        )
    }


def faithfulness_prompt(record: Record) -> str:
    """What the judge is sent for ``record`` (the stub answers by the exact prompt)."""
    assert record.input is not None
    assert record.output is not None
    messages = FAITHFULNESS_TEMPLATE.render(
        question=record.input.as_text(),
        context=passages_block(record),
        answer=record.output.as_text(),
    )
    return messages[-1].content or ""


def claims(*flags: bool) -> str:
    items: list[dict[str, Any]] = []
    for i, ok in enumerate(flags, 1):
        item: dict[str, Any] = {"claim": f"claim {i}", "supported": ok}
        if not ok:
            item["reason"] = f"no passage says claim {i}"
        items.append(item)
    return json.dumps({"claims": items})


def judges(stub: StubLLM) -> dict[str, Any]:
    return {
        "default": {
            "connector": "openai-compatible",
            "baseUrl": stub.openai_url,
            "model": "judge-model",
            "params": {"temperature": 0},
        }
    }


VERDICTS = {
    "capital": claims(True),
    "boiling": claims(True, True),
    "everest": claims(True),
    "dna": claims(True, True, False),  # Rosalind Franklin is in no passage
    "chlorophyll": claims(True, True),
    "shakespeare": claims(False),
    "python": claims(True),
}


def test_faithfulness_on_the_example_dataset_over_http(tmp_path: Path) -> None:
    recs = records()
    answers = {faithfulness_prompt(recs[rid]): text for rid, text in VERDICTS.items()}
    answers[faithfulness_prompt(recs["moon"])] = "Both claims look supported to me."
    answers[REPAIR_PROMPT] = claims(True, True)
    with StubLLM(answers=answers, default="unexpected prompt") as stub:
        result = evalsi.evaluate(
            str(DATA), ["faithfulness"], judges=judges(stub), store=str(tmp_path / "s.db")
        )
        calls = stub.calls(OPENAI_PATH)
    assert calls == len(recs) + 1  # one repair request, for "moon"
    by_id = {r.record_id: r for r in result.results}
    assert all(r.outcome is Outcome.SCORED for r in by_id.values()), by_id
    got: dict[str, float] = {rid: r.scores[0].number or 0.0 for rid, r in by_id.items()}
    assert got == pytest.approx(
        {
            "capital": 1,
            "moon": 1,
            "boiling": 1,
            "everest": 1,
            "dna": 2 / 3,
            "chlorophyll": 1,
            "shakespeare": 0,
            "python": 1,
        }
    )
    assert by_id["moon"].scores[0].metadata["repaired"] is True
    dna = by_id["dna"].scores[0]
    assert dna.explanation == (
        '1 of 3 claims not supported by the context: "claim 3" (no passage says claim 3)'
    )
    assert dna.metadata["judge_identity"]["model"] == "judge-model"
    assert result.metric("faithfulness").mean == pytest.approx(sum(got.values()) / len(got))


def test_a_judge_that_never_answers_in_format_is_an_error(tmp_path: Path) -> None:
    recs = records()
    answers = {faithfulness_prompt(recs[rid]): text for rid, text in VERDICTS.items()}
    answers[faithfulness_prompt(recs["moon"])] = '{"claims": "fine"}'
    answers[REPAIR_PROMPT] = "I already told you: it is fine."
    with StubLLM(answers=answers, default="unexpected prompt") as stub:
        result = evalsi.evaluate(
            str(DATA), ["faithfulness"], judges=judges(stub), store=str(tmp_path / "s.db")
        )
    moon = next(r for r in result.results if r.record_id == "moon")
    assert moon.outcome is Outcome.ERROR
    assert moon.reason.startswith("JudgeFormatError: judge 'default' did not answer in the format")
    assert "I already told you: it is fine." in moon.reason
    metric = result.metric("faithfulness")
    assert (metric.n, metric.errors) == (len(recs) - 1, 1)
