"""ROUGE-1/2/L/Lsum equal ``rouge_score.RougeScorer`` record by record (F-measure, precision,
recall), with and without the stemmer, with several references, and with the Unicode
tokenizer. Golden vectors: ``examples/text/summaries.jsonl`` and the translation pairs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from nltk.stem import porter
from rouge_score import rouge_scorer

import evalsi
from evalsi.core import Outcome
from evalsi.evaluators import Registry
from evalsi.packs import text

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXAMPLES / name).read_text().splitlines()]


SUMMARIES = load("summaries.jsonl")
TRANSLATIONS = load("translations.jsonl")
TYPES = {"rouge-1": "rouge1", "rouge-2": "rouge2", "rouge-l": "rougeL", "rouge-lsum": "rougeLsum"}
EDGES = [
    {"id": "empty-out", "output": "", "reference": "A summary."},
    {"id": "empty-ref", "output": "A summary.", "reference": ""},
    {"id": "one-word", "output": "Ferry", "reference": "ferry"},
    {"id": "punct-only", "output": "…!?", "reference": "Nothing matches."},
]


def results(rows: list[dict[str, Any]], name: str, **params: Any) -> list[Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    by_id = {x.record_id: x for x in r.results if x.evaluator == name}
    return [by_id[row["id"]] for row in rows]


def check(result: Any, name: str, expected: Any) -> None:
    assert result.outcome is Outcome.SCORED, result.reason
    got = {s.name: s.number for s in result.scores}
    assert got == {
        name: expected.fmeasure,
        f"{name}-precision": expected.precision,
        f"{name}-recall": expected.recall,
    }


@pytest.mark.parametrize("stem", [False, True], ids=["plain", "stemmed"])
@pytest.mark.parametrize("name", TYPES)
def test_rouge_equals_rouge_score(name: str, stem: bool) -> None:
    rows = SUMMARIES + TRANSLATIONS + EDGES
    scorer = rouge_scorer.RougeScorer([TYPES[name]], use_stemmer=stem)
    for row, result in zip(rows, results(rows, name, use_stemmer=stem), strict=True):
        check(result, name, scorer.score(row["reference"], row["output"])[TYPES[name]])


def test_rouge_lsum_splits_sentences_on_newlines() -> None:
    row = SUMMARIES[0]
    scorer = rouge_scorer.RougeScorer(["rougeLsum", "rougeL"])
    whole = scorer.score(row["reference"], row["output"])
    (lsum,) = results([row], "rouge-lsum")
    (rl,) = results([row], "rouge-l")
    assert lsum.scores[0].number == whole["rougeLsum"].fmeasure
    assert rl.scores[0].number == whole["rougeL"].fmeasure
    assert lsum.scores[0].number != rl.scores[0].number  # two sentences: summary-level LCS
    flat = {**row, "output": row["output"].replace("\n", " "), "reference": row["reference"]}
    (one_line,) = results([flat], "rouge-lsum")
    assert (
        one_line.scores[0].number
        == scorer.score(flat["reference"], flat["output"])["rougeLsum"].fmeasure
    )


@pytest.mark.parametrize("name", TYPES)
def test_several_references_take_the_best_f_measure_as_score_multi(name: str) -> None:
    rows = [
        {"id": s["id"], "output": s["output"], "reference": [t["reference"], s["reference"]]}
        for s, t in zip(SUMMARIES, TRANSLATIONS, strict=False)
    ]
    scorer = rouge_scorer.RougeScorer([TYPES[name]])
    for row, result in zip(rows, results(rows, name), strict=True):
        check(result, name, scorer.score_multi(row["reference"], row["output"])[TYPES[name]])
        assert "reference 2 of 2" in result.scores[0].explanation


class _Words:
    """An independent Unicode word tokenizer for rouge-score (letters and digits, lowercased)."""

    def __init__(self, stem: bool) -> None:
        self.stemmer = porter.PorterStemmer() if stem else None

    def tokenize(self, text: str) -> list[str]:
        words = [w for w in re.split(r"[\W_]+", text.lower()) if w]
        if self.stemmer:
            words = [self.stemmer.stem(w) if len(w) > 3 else w for w in words]
        return words


@pytest.mark.parametrize("stem", [False, True], ids=["plain", "stemmed"])
def test_unicode_tokenizer_keeps_accented_words(stem: bool) -> None:
    rows = [  # into French, German and Spanish, then Chinese
        *TRANSLATIONS[16:],
        {"id": "zh", "output": "我们 明天 去 北京", "reference": "我们 明天 要 去 北京"},
    ]
    scorer = rouge_scorer.RougeScorer(["rouge1"], tokenizer=_Words(stem))
    default = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=stem)
    got = results(rows, "rouge-1", tokenizer="unicode", use_stemmer=stem)
    for row, result in zip(rows, got, strict=True):
        check(result, "rouge-1", scorer.score(row["reference"], row["output"])["rouge1"])
    zh = got[-1].scores[0].number
    assert zh == pytest.approx(2 * 4 / 9)  # 4 of 4 words match out of 5 in the reference
    assert default.score("我们 明天 要 去 北京", "我们 明天 去 北京")["rouge1"].fmeasure == 0.0


def test_non_text_output_is_an_error() -> None:
    (result,) = results([{"id": "x", "output": {"json": 12}, "reference": "12"}], "rouge-l")
    assert result.outcome is Outcome.ERROR
    assert "rouge-l needs a text output, got a JSON number" in result.reason
