"""The rag pack as a whole: its evaluators, their manifests, and the guide that documents them."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from evalsi.evaluators import Evaluator, UsesJudge
from evalsi.packs import BUILTIN_PACKS, builtin_registry, rag

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "packs" / "rag.md"
NAMES = [
    "context-precision",
    "context-recall",
    "context-ndcg",
    "context-mrr",
    "faithfulness",
    "answer-relevance",
    "context-relevance",
    "context-sufficiency",
    "citation-accuracy",
]


def test_the_pack_holds_exactly_these_evaluators() -> None:
    assert [ev.name for ev in rag.EVALUATORS] == NAMES
    assert BUILTIN_PACKS["rag"].evaluators == rag.EVALUATORS
    reg = builtin_registry(entry_points=False)
    assert [reg.resolve(n).ref for n in NAMES] == [f"builtin/{n}@1.0.0" for n in NAMES]


@pytest.mark.parametrize("ev", rag.EVALUATORS, ids=lambda ev: ev.name)
def test_manifest_contract(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.pack == "rag"
    assert m.version == "1.0.0"
    assert m.description.endswith(".")
    assert "context" in m.requires or "input" in m.requires
    main = m.outputs[0]
    assert (main.name, main.type, main.range, main.higher_is_better) == (
        ev.name,
        "number",
        (0.0, 1.0),
        True,
    )
    doc = inspect.getdoc(ev.target) or ""
    for spec in ev.params:
        assert f"    {spec.name}: " in doc, f"{ev.name}: param {spec.name} is not documented"
    judged = isinstance(ev.target, type) and issubclass(ev.target, UsesJudge)
    assert judged == ("judges=" in m.example)
    if judged:
        assert [o.name for o in m.outputs] == [ev.name, f"{ev.name}-passed"]
    else:
        assert m.example.startswith("evalsi eval --data examples/rag/rag.jsonl")


def test_the_guide_documents_every_metric_and_template() -> None:
    text = GUIDE.read_text()
    for name in NAMES:
        assert f"`{name}`" in text, name
    for template in rag.TEMPLATES:
        assert f"`{template.version}`" in text, template.version
