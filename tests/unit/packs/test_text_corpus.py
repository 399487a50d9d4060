"""Corpus BLEU, chrF / chrF++ and TER equal sacrebleu's ``corpus_*`` functions, and sentence
BLEU equals ``sentence_bleu``, through ``evalsi.evaluate``.

Golden vectors: the 40 translation pairs of ``examples/text/translations.jsonl`` (sentences
written for this project; into English, French, German and Spanish, with accents), second
references for some of them, and edge cases: an empty hypothesis, an empty reference, a
single pair, CJK text and emoji.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError, UserError
from evalsi.evaluators import Registry
from evalsi.packs import text

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"
PAIRS = [json.loads(line) for line in (EXAMPLES / "translations.jsonl").read_text().splitlines()]

# Second references (independent paraphrases) for some pairs: a varying number per sentence.
SECOND = {
    "de-en-01": "The train to Munich isn't running today due to a strike.",
    "de-en-04": "Can you show me how to get to the station, please?",
    "fr-en-01": "The cat has been sleeping on the couch since this morning.",
    "fr-en-03": "Book a table: the restaurant is always full on a Friday.",
    "es-en-01": "The Buenos Aires flight departed two hours behind schedule.",
    "en-fr-06": "Notre hôtel se trouve à deux pas du vieux port.",
    "en-de-02": "Meine Oma zieht Tomaten in ihrem Garten.",
    "en-es-05": "Gire a la izquierda pasada la iglesia y siga recto.",
}

EDGES = [
    {"id": "empty-hyp", "output": "", "reference": "The station is closed."},
    {"id": "empty-ref", "output": "Nothing to translate here.", "reference": ""},
    {"id": "zh", "output": "我们明天去北京。", "reference": "我们明天要去北京。"},
    {"id": "emoji", "output": "Bon appétit 🍝 à tous !", "reference": "Bon appétit à tous 🍝 !"},
    {"id": "both-empty", "output": "", "reference": ""},
]


def dataset_result(rows: list[dict[str, Any]], name: str, **params: Any) -> EvaluationResult:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result


def corpus(rows: list[dict[str, Any]], name: str, **params: Any) -> tuple[float, Any]:
    result = dataset_result(rows, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    (score,) = result.scores
    assert score.number is not None
    return score.number, score


def hyps_refs(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str | None]]]:
    """sacrebleu's input: hypotheses and reference streams (None where a row has fewer)."""
    refs = [r["reference"] if isinstance(r["reference"], list) else [r["reference"]] for r in rows]
    width = max(len(x) for x in refs)
    streams = [[x[k] if k < len(x) else None for x in refs] for k in range(width)]
    return [r["output"] for r in rows], streams


def multi_ref_rows() -> list[dict[str, Any]]:
    return [
        {**p, "reference": [p["reference"], SECOND[p["id"]]]} if p["id"] in SECOND else p
        for p in PAIRS
    ]


DATASETS = {
    "pairs": lambda: PAIRS,
    "multi-ref": multi_ref_rows,
    "edges": lambda: PAIRS[:10] + EDGES,
    "one-pair": lambda: PAIRS[7:8],
}

BLEU_CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),
    ({"lowercase": True}, {"lowercase": True}),
    ({"tokenize": "intl"}, {"tokenize": "intl"}),
    ({"tokenize": "char"}, {"tokenize": "char"}),
    (
        {"smooth_method": "floor", "smooth_value": 0.2},
        {"smooth_method": "floor", "smooth_value": 0.2},
    ),
    ({"smooth_method": "add-k"}, {"smooth_method": "add-k"}),
    ({"smooth_method": "none"}, {"smooth_method": "none"}),
    ({"max_ngram_order": 2}, {"max_ngram_order": 2}),
    ({"effective_order": True}, {"effective_order": True}),
]


@pytest.mark.parametrize("data", DATASETS)
@pytest.mark.parametrize(("params", "kwargs"), BLEU_CASES, ids=lambda v: str(v))
def test_bleu_equals_sacrebleu(data: str, params: dict[str, Any], kwargs: dict[str, Any]) -> None:
    rows = DATASETS[data]()
    hyps, streams = hyps_refs(rows)
    metric = BLEU(**kwargs)
    expected = metric.corpus_score(hyps, streams)
    value, score = corpus(rows, "bleu", **params)
    assert value == expected.score
    signature = str(metric.get_signature())
    assert score.metadata["signature"] == signature
    assert score.explanation == expected.format(signature=signature)
    assert score.metadata["sys_len"] == expected.sys_len
    assert score.metadata["ref_len"] == expected.ref_len


def test_bleu_matches_the_corpus_bleu_function_and_its_signature() -> None:
    hyps, streams = hyps_refs(multi_ref_rows())
    expected = sacrebleu.corpus_bleu(hyps, streams)
    value, score = corpus(multi_ref_rows(), "bleu")
    assert value == expected.score
    assert "nrefs:var" in score.metadata["signature"]  # 1 or 2 references per sentence
    assert "tok:13a" in score.metadata["signature"]
    assert f"version:{sacrebleu.__version__}" in score.explanation
    assert 0 < value < 100


CHRF_CASES = [
    {},
    {"word_order": 2},
    {"word_order": 2, "lowercase": True},
    {"char_order": 4, "beta": 1},
    {"whitespace": True},
    {"eps_smoothing": True},
    {"word_order": 1, "eps_smoothing": True},
]


@pytest.mark.parametrize("data", DATASETS)
@pytest.mark.parametrize("params", CHRF_CASES, ids=lambda v: str(v))
def test_chrf_equals_sacrebleu(data: str, params: dict[str, Any]) -> None:
    rows = DATASETS[data]()
    hyps, streams = hyps_refs(rows)
    metric = CHRF(**params)
    expected = metric.corpus_score(hyps, streams)
    value, score = corpus(rows, "chrf", **params)
    assert value == expected.score
    assert score.metadata["signature"] == str(metric.get_signature())
    assert score.metadata["variant"] == expected.name  # chrF2, chrF2++ ...


def test_chrf_plus_plus_is_word_order_two() -> None:
    hyps, streams = hyps_refs(PAIRS)
    expected = sacrebleu.corpus_chrf(hyps, streams, word_order=2)
    value, score = corpus(PAIRS, "chrf", word_order=2)
    assert value == expected.score
    assert score.metadata["variant"] == "chrF2++"
    assert "nw:2" in score.metadata["signature"]


TER_CASES = [
    {},
    {"case_sensitive": True},
    {"normalized": True},
    {"no_punct": True},
    {"normalized": True, "asian_support": True},
]


@pytest.mark.parametrize("data", DATASETS)
@pytest.mark.parametrize("params", TER_CASES, ids=lambda v: str(v))
def test_ter_equals_sacrebleu(data: str, params: dict[str, Any]) -> None:
    rows = DATASETS[data]()
    hyps, streams = hyps_refs(rows)
    metric = TER(**params)
    expected = metric.corpus_score(hyps, streams)
    value, score = corpus(rows, "ter", **params)
    # multi-reference TER averages reference lengths: sums of fractions, summed in another order
    assert value == pytest.approx(expected.score, rel=1e-12, abs=1e-9)
    if data != "multi-ref":
        assert value == expected.score
    assert score.metadata["signature"] == str(metric.get_signature())
    assert score.metadata["edits"] == expected.num_edits


def test_bleu_with_the_chinese_tokenizer() -> None:
    rows = [EDGES[2], {"output": "今天天气很好。", "reference": "今天的天气很好。"}]
    hyps, streams = hyps_refs(rows)
    value, _ = corpus(rows, "bleu", tokenize="zh")
    assert value == sacrebleu.corpus_bleu(hyps, streams, tokenize="zh").score
    assert value > 0


def record_results(rows: list[dict[str, Any]], name: str, **params: Any) -> list[Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    by_id = {x.record_id: x for x in r.results if x.evaluator == name}
    return [by_id[str(row["id"])] for row in rows]


@pytest.mark.parametrize(
    "params",
    [{}, {"smooth_method": "floor"}, {"effective_order": False}, {"lowercase": True}],
    ids=str,
)
def test_sentence_bleu_equals_sacrebleu_sentence_bleu(params: dict[str, Any]) -> None:
    rows = multi_ref_rows() + EDGES
    kwargs = {
        ("use_effective_order" if k == "effective_order" else k): v for k, v in params.items()
    }
    for row, result in zip(rows, record_results(rows, "sentence-bleu", **params), strict=True):
        assert result.outcome is Outcome.SCORED, result.reason
        refs = row["reference"] if isinstance(row["reference"], list) else [row["reference"]]
        expected = sacrebleu.sentence_bleu(row["output"], refs, **kwargs)
        assert result.scores[0].number == expected.score, row["id"]
        assert result.scores[0].metadata["signature"].startswith(f"nrefs:{len(refs)}|")


def test_bad_outputs_and_references_are_errors_with_reasons() -> None:
    rows = [
        {"id": "list", "output": ["a", "b"], "reference": "a b"},
        {"id": "number", "output": {"json": 3}, "reference": "3"},
        {"id": "object", "output": {"answer": "x"}, "reference": "x"},
        {"id": "ref-number", "output": "x", "reference": {"json": 7}},
        {"id": "ref-list-mixed", "output": "x", "reference": ["x", 3]},
        {"id": "empty-ref-list", "output": "x", "reference": {"json": []}},
        {"id": "no-ref", "output": "x"},
        {"id": "text-object", "output": {"text": "The museum is closed on Mondays."},
         "reference": "The museum is closed on Mondays."},
    ]  # fmt: skip
    got = {r.record_id: r for r in record_results(rows, "sentence-bleu")}
    assert got["list"].outcome is Outcome.ERROR
    assert "output is a JSON list" in got["list"].reason
    assert "several references go in reference" in got["list"].reason
    assert "got a JSON number" in got["number"].reason
    assert '{"text": "…"}' in got["object"].reason
    assert "text reference or a list of text references, got a JSON number" in (
        got["ref-number"].reason
    )
    assert "reference list holds a number" in got["ref-list-mixed"].reason
    assert got["empty-ref-list"].outcome is Outcome.SKIPPED
    assert "empty list" in got["empty-ref-list"].reason
    assert got["no-ref"].outcome is Outcome.SKIPPED
    assert got["text-object"].outcome is Outcome.SCORED
    same = "The museum is closed on Mondays."
    assert got["text-object"].scores[0].number == sacrebleu.sentence_bleu(same, [same]).score


def test_corpus_bleu_leaves_out_bad_records_and_counts_them() -> None:
    rows = [*PAIRS[:6], {"id": "bad", "output": ["a list"], "reference": "x"}]
    r = evalsi.evaluate(data=rows, evaluators=["bleu"], registry=REG, store=":memory:")
    hyps, streams = hyps_refs(PAIRS[:6])
    assert r.metric("bleu").mean == sacrebleu.corpus_bleu(hyps, streams).score
    assert r.metric("bleu").errors == 1


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("bleu", {"tokenize": "spm"}, "must be one of"),
        ("bleu", {"max_ngram_order": 0}, "'max_ngram_order' must be >= 1"),
        ("bleu", {"smooth_value": 0.1}, "smooth_value' applies to smooth_method floor or add-k"),
        ("chrf", {"char_order": 0}, "'char_order' must be >= 1"),
        ("chrf", {"word_order": -1}, "'word_order' must be >= 0"),
        ("sentence-bleu", {"smooth_method": "magic"}, "must be one of"),
    ],
)
def test_bad_params_fail_at_bind(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        REG.resolve(name).bind(params)


def test_a_tokenizer_whose_package_is_missing_fails_at_bind() -> None:
    try:
        import MeCab  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="ja-mecab"):
            REG.resolve("bleu").bind({"tokenize": "ja-mecab"})
    else:  # pragma: no cover - only where mecab-python3 is installed
        pytest.skip("mecab-python3 is installed here")
