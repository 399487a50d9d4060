"""The safety pack's registration, manifests and prompt templates (the catalog contract)."""

from __future__ import annotations

import inspect

import pytest

from evalsi.evaluators import Evaluator
from evalsi.packs import BUILTIN_PACKS, builtin_registry
from evalsi.packs.judge import LLM_JUDGE_TEMPLATE
from evalsi.packs.safety import EVALUATORS, REFUSAL_TEMPLATE, TOXICITY_TEMPLATE

NAMES = ("pii-leakage", "secret-leakage", "prompt-injection", "refusal-correctness", "toxicity")


def test_registered_as_the_safety_pack() -> None:
    assert BUILTIN_PACKS["safety"].evaluators == EVALUATORS
    reg = builtin_registry(entry_points=False)
    assert [reg.resolve(n).ref for n in NAMES] == [f"builtin/{n}@1.0.0" for n in NAMES]


@pytest.mark.parametrize("ev", EVALUATORS, ids=lambda e: e.name)
def test_manifest_contract(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.pack == "safety"
    assert m.version == "1.0.0"
    assert m.scope.value == "record"
    assert m.requires == ("output",)
    assert m.description.endswith(".")
    assert m.outputs[0].name == ev.name
    for out in m.outputs:
        assert out.description
        if out.type in ("passed", "number"):
            assert out.range == (0.0, 1.0)
            assert out.higher_is_better is not None
    assert m.example.startswith(("evalsi eval --data examples/safety/", "evalsi.evaluate("))
    doc = inspect.getdoc(ev.target) or ""
    for spec in ev.params:
        assert f"    {spec.name}: " in doc, f"{ev.name}: param {spec.name} is not documented"


def test_judge_templates_are_versioned_and_distinct() -> None:
    templates = [REFUSAL_TEMPLATE, TOXICITY_TEMPLATE, LLM_JUDGE_TEMPLATE]
    assert len({t.hash for t in templates}) == 3
    assert REFUSAL_TEMPLATE.version == "refusal-correctness/v1"
    assert TOXICITY_TEMPLATE.version == "toxicity/v1"
