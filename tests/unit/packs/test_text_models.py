"""bertscore and embedding-similarity: SKIPPED with a reason when their library or a local model
is missing; with a library present, a thin adapter over it.

No real model can be fetched here, so the adapters are exercised with stand-in libraries
(fakes with the same call shapes) whose results the tests recompute independently.
"""

from __future__ import annotations

import sys
import types
import zlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

import evalsi
from evalsi.core import Outcome, ParamError
from evalsi.evaluators import Registry
from evalsi.packs import text

REG = Registry(text.EVALUATORS)
ROWS = [
    {"id": "a", "output": "The museum is closed on Mondays.", "reference": "It closes on Mondays."},
    {"id": "b", "output": "Il fait beau.", "reference": ["Il pleut.", "Il fait très beau."]},
    {"id": "c", "output": {"json": 4}, "reference": "four"},
]  # fmt: skip


def results(rows: list[dict[str, Any]], name: str, **params: Any) -> list[Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    by_id = {x.record_id: x for x in r.results}
    return [by_id[row["id"]] for row in rows]


@pytest.mark.parametrize(
    ("name", "module", "package"),
    [("bertscore", "bert_score", "bert-score"), ("embedding-similarity", "sentence_transformers",
                                                  "sentence-transformers")],
)  # fmt: skip
def test_without_the_library_every_record_is_skipped(
    name: str, module: str, package: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the library absent
    params = {"model": str(tmp_path)} | ({"num_layers": 9} if name == "bertscore" else {})
    got = results(ROWS, name, **params)
    reasons = {r.reason for r in got}
    assert {r.outcome for r in got} == {Outcome.SKIPPED}
    assert reasons == {
        f"{name} needs the {package} library, which is not installed: "
        "pip install 'evalsi[text-models]'"
    }


def _vector(text: str) -> npt.NDArray[np.float64]:
    """A deterministic bag-of-character-trigrams embedding (the stand-in model)."""
    v = np.zeros(64)
    padded = f"  {text.lower()} "
    for i in range(len(padded) - 2):
        v[zlib.crc32(padded[i : i + 3].encode()) % 64] += 1.0
    return v


class FakeSentenceTransformer:
    loaded: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, path: str, **kwargs: Any) -> None:
        FakeSentenceTransformer.loaded.append({"path": path, **kwargs})

    def encode(
        self, texts: list[str], *, convert_to_numpy: bool, normalize_embeddings: bool
    ) -> npt.NDArray[np.float64]:
        assert convert_to_numpy
        assert normalize_embeddings
        m = np.array([_vector(t) for t in texts])
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_without_a_model_every_record_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    got = results(ROWS, "embedding-similarity")
    assert {r.outcome for r in got} == {Outcome.SKIPPED}
    (reason,) = {r.reason for r in got}
    assert reason.startswith("no local model: set param model to a local sentence-transformers")
    assert "--param embedding-similarity.model=" in reason


def test_embedding_similarity_is_the_best_cosine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    FakeSentenceTransformer.loaded.clear()
    got = results(ROWS, "embedding-similarity", model=str(tmp_path))
    assert FakeSentenceTransformer.loaded == [
        {"path": str(tmp_path), "device": "cpu", "local_files_only": True}
    ]  # loaded once, from the local directory, never from a hub

    def cosine(a: str, b: str) -> float:
        x, y = _vector(a), _vector(b)
        return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))

    assert got[0].scores[0].number == pytest.approx(cosine(ROWS[0]["output"], ROWS[0]["reference"]))
    best = max(cosine("Il fait beau.", r) for r in ROWS[1]["reference"])
    assert got[1].scores[0].number == pytest.approx(best)
    assert "reference 2" in got[1].scores[0].explanation
    assert got[2].outcome is Outcome.ERROR
    assert "needs a text output" in got[2].reason


class FakeBertScorer:
    """Returns precision, recall and F1 of word overlap, best reference by F1 (as bert-score)."""

    made: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, **kwargs: Any) -> None:
        FakeBertScorer.made.append(kwargs)

    def score(self, cands: list[str], refs: list[list[str]]) -> tuple[list[float], ...]:
        (cand,), (options,) = cands, refs
        best = (-1.0, 0.0, 0.0)
        for ref in options:
            c, r = set(cand.split()), set(ref.split())
            p, rec = len(c & r) / len(c), len(c & r) / len(r)
            f = 2 * p * rec / (p + rec) if p + rec else 0.0
            best = max(best, (f, p, rec))
        return [best[1]], [best[2]], [best[0]]


def test_bertscore_reports_f1_precision_and_recall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = types.ModuleType("bert_score")
    fake.BERTScorer = FakeBertScorer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bert_score", fake)
    FakeBertScorer.made.clear()
    row = {"id": "x", "output": "a b c d", "reference": ["a x", "a b c e f"]}
    (got,) = results([row], "bertscore", model=str(tmp_path), num_layers=9)
    assert FakeBertScorer.made == [{"model_type": str(tmp_path), "num_layers": 9, "device": "cpu"}]
    assert {s.name: s.number for s in got.scores} == pytest.approx(
        {"bertscore": 2 * 0.75 * 0.6 / 1.35, "bertscore-precision": 0.75, "bertscore-recall": 0.6}
    )


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("embedding-similarity", {"model": "/no/such/dir"}, "is not a directory"),
        ("bertscore", {"model": "/no/such/dir", "num_layers": 9}, "is not a directory"),
        ("bertscore", {"model": "."}, "'num_layers' is required"),
        ("bertscore", {"num_layers": 0}, "'num_layers' must be >= 1"),
    ],
)
def test_bad_params_fail_at_bind(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        REG.resolve(name).bind(params)
