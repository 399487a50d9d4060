"""The judge pack's manifests, prompt templates and the store's judge cache."""

from __future__ import annotations

import inspect

import pytest

from evalsi.evaluators import Evaluator
from evalsi.packs import BUILTIN_PACKS, builtin_registry
from evalsi.packs.judge import (
    EVALUATORS,
    G_EVAL_TEMPLATE,
    LLM_JUDGE_TEMPLATE,
    PAIRWISE_TEMPLATE,
    REFERENCE_TEMPLATE,
)
from evalsi.store import SqlStore


def test_registered_as_a_pack() -> None:
    assert BUILTIN_PACKS["judge"].evaluators == EVALUATORS
    reg = builtin_registry(entry_points=False)
    refs = {
        reg.resolve(n).ref for n in ("llm-judge", "g-eval", "pairwise", "reference-correctness")
    }
    assert refs == {
        "builtin/llm-judge@1.0.0",
        "builtin/g-eval@1.0.0",
        "builtin/pairwise@1.0.0",
        "builtin/reference-correctness@1.0.0",
    }


@pytest.mark.parametrize("ev", EVALUATORS, ids=lambda e: e.name)
def test_manifest_contract(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.pack == "judge"
    assert m.version == "1.0.0"
    assert m.description.endswith(".")
    assert "output" in m.requires
    assert m.outputs[0].name == ev.name
    assert m.example.startswith("evalsi.evaluate(")
    assert "judges=" in m.example
    doc = inspect.getdoc(ev.target) or ""
    for spec in ev.params:
        assert f"    {spec.name}: " in doc, f"{ev.name}: param {spec.name} is not documented"


def test_templates_are_versioned_and_distinct() -> None:
    templates = [LLM_JUDGE_TEMPLATE, G_EVAL_TEMPLATE, REFERENCE_TEMPLATE, PAIRWISE_TEMPLATE]
    assert len({t.hash for t in templates}) == len(templates)
    assert all(t.version.endswith("/v1") for t in templates)
    assert all(t.hash.startswith("sha256:") for t in templates)


def test_judge_cache_round_trip() -> None:
    store = SqlStore.open(":memory:")
    assert store.judge_cache_get("k") is None
    store.judge_cache_put("k", "answer", {"total_tokens": 3})
    store.judge_cache_put("k", "other", {"total_tokens": 9})  # the first answer wins
    assert store.judge_cache_get("k") == ("answer", {"total_tokens": 3})
    store.close()
