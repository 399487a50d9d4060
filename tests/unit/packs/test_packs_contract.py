"""Conventions every built-in evaluator keeps, whatever its pack: stable kebab-case names, a
described manifest with a runnable example, heavy libraries imported only when used, and the
fast bootstrap protocol on every dataset-scope metric."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from evalsi.core import Scope
from evalsi.evaluators import Evaluator
from evalsi.packs import BUILTIN_PACKS

ALL = [ev for pack in BUILTIN_PACKS.values() for ev in pack.evaluators]
KEBAB = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


@pytest.mark.parametrize("ev", ALL, ids=lambda ev: ev.name)
def test_manifest_is_complete(ev: Evaluator) -> None:
    m = ev.manifest
    assert m.ref.namespace == "builtin"
    assert KEBAB.fullmatch(m.ref.name), m.ref.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", m.version)
    assert m.pack in BUILTIN_PACKS
    assert m.description, m.ref
    assert not m.description.endswith(":"), m.description
    assert m.example, f"{m.ref}: no example"
    assert m.outputs, f"{m.ref}: declares no outputs"
    for out in m.outputs:
        assert KEBAB.fullmatch(out.name), out.name


@pytest.mark.parametrize(
    "ev", [ev for ev in ALL if ev.manifest.scope is Scope.DATASET], ids=lambda ev: ev.name
)
def test_dataset_scope_metrics_offer_weighted_resampling(ev: Evaluator) -> None:
    cls = ev.target
    assert callable(getattr(cls, "prepare", None)), f"{ev.ref}: no prepare()"
    assert callable(getattr(cls, "reduce_weighted", None)), f"{ev.ref}: no reduce_weighted()"


def test_importing_every_pack_loads_no_optional_library() -> None:
    heavy = ("sacrebleu", "rouge_score", "nltk", "sklearn", "presidio_analyzer", "torch",
             "transformers", "sentence_transformers", "krippendorff", "spacy")  # fmt: skip
    code = (
        "import sys, evalsi, evalsi.packs;"
        "evalsi.packs.builtin_registry(entry_points=False);"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
