"""The text pack: BLEU, chrF, TER, ROUGE, METEOR, edit distance, perplexity and model-based
similarity.

Each is registered as ``builtin/<name>@1.0.0``; the guide is docs/guides/packs/text.md.
Records carry the hypothesis in ``output`` and one reference (text) or several (a JSON list
of strings) in ``reference``. BLEU / chrF / TER equal sacrebleu's and report on its 0-100
scale with its signature; ROUGE equals rouge-score's. sacrebleu, rouge-score and NLTK come
with the ``text`` extra and are imported only when one of these evaluators is bound.
"""

from __future__ import annotations

from evalsi.core import OutputSpec, Scope
from evalsi.evaluators import Evaluator, evaluator
from evalsi.packs.text._corpus import Bleu, Chrf, SentenceBleu, Ter
from evalsi.packs.text._edit import EditDistance
from evalsi.packs.text._meteor import Meteor
from evalsi.packs.text._models import BertScore, EmbeddingSimilarity
from evalsi.packs.text._perplexity import perplexity as _perplexity
from evalsi.packs.text._rouge import Rouge1, Rouge2, RougeL, RougeLsum

_DATA = "examples/text/translations.jsonl"


def _declare(
    name: str,
    target: object,
    outputs: list[OutputSpec],
    *,
    scope: Scope = Scope.RECORD,
    requires: tuple[str, ...] = ("output", "reference"),
    example: str = "",
) -> Evaluator:
    return evaluator(
        name=f"builtin/{name}",
        version="1.0.0",
        scope=scope,
        pack="text",
        requires=requires,
        outputs=outputs,
        example=example or f"evalsi eval --data {_DATA} --evaluators {name}",
    )(target)


def _out(
    name: str, desc: str, rng: tuple[float, float] | None = (0.0, 1.0), higher: bool = True
) -> OutputSpec:
    return OutputSpec(name, "number", rng, higher, desc)


def _prf(name: str, what: str) -> list[OutputSpec]:
    return [
        _out(name, f"{what} F-measure, 0-1"),
        _out(f"{name}-precision", f"{what} precision, 0-1"),
        _out(f"{name}-recall", f"{what} recall, 0-1"),
    ]


bleu = _declare(
    "bleu",
    Bleu,
    [_out("bleu", "corpus BLEU (sacrebleu), 0-100", (0.0, 100.0))],
    scope=Scope.DATASET,
)
sentence_bleu = _declare(
    "sentence-bleu",
    SentenceBleu,
    [_out("sentence-bleu", "sentence BLEU, effective order (sacrebleu), 0-100", (0.0, 100.0))],
)
chrf = _declare(
    "chrf",
    Chrf,
    [_out("chrf", "corpus chrF (word_order=2: chrF++) (sacrebleu), 0-100", (0.0, 100.0))],
    scope=Scope.DATASET,
    example=f"evalsi eval --data {_DATA} --evaluators chrf --param chrf.word_order=2",
)
ter = _declare(
    "ter",
    Ter,
    [_out("ter", "corpus translation edit rate (sacrebleu), >= 0", None, higher=False)],
    scope=Scope.DATASET,
)
_SUMMARIES = "examples/text/summaries.jsonl"
rouge_1 = _declare(
    "rouge-1",
    Rouge1,
    _prf("rouge-1", "ROUGE-1"),
    example=f"evalsi eval --data {_SUMMARIES} --evaluators rouge-1",
)
rouge_2 = _declare(
    "rouge-2",
    Rouge2,
    _prf("rouge-2", "ROUGE-2"),
    example=f"evalsi eval --data {_SUMMARIES} --evaluators rouge-2",
)
rouge_l = _declare(
    "rouge-l",
    RougeL,
    _prf("rouge-l", "ROUGE-L"),
    example=f"evalsi eval --data {_SUMMARIES} --evaluators rouge-l",
)
rouge_lsum = _declare(
    "rouge-lsum",
    RougeLsum,
    _prf("rouge-lsum", "ROUGE-Lsum (sentences split on newlines)"),
    example=f"evalsi eval --data {_SUMMARIES} --evaluators rouge-lsum",
)
meteor = _declare(
    "meteor",
    Meteor,
    [_out("meteor", "METEOR (NLTK, needs WordNet), 0-1")],
)
edit_distance = _declare(
    "edit-distance",
    EditDistance,
    [
        _out("edit-distance", "Levenshtein distance (characters or words)", None, higher=False),
        _out("edit-similarity", "1 - distance / max(length), 0-1"),
    ],
)
perplexity = _declare(
    "perplexity",
    _perplexity,
    [_out("perplexity", "exp(-mean token logprob) from given logprobs, >= 1", None, False)],
    requires=(),
    example="evalsi eval --data examples/text/logprobs.jsonl --evaluators perplexity",
)
bertscore = _declare(
    "bertscore",
    BertScore,
    _prf("bertscore", "BERTScore (local model)"),
    example=f"evalsi eval --data {_DATA} --evaluators bertscore "
    "--param bertscore.model=/models/roberta-large --param bertscore.num_layers=17",
)
embedding_similarity = _declare(
    "embedding-similarity",
    EmbeddingSimilarity,
    [_out("embedding-similarity", "cosine similarity of embeddings (local model)", (-1.0, 1.0))],
    example=f"evalsi eval --data {_DATA} --evaluators embedding-similarity "
    "--param embedding-similarity.model=/models/all-MiniLM-L6-v2",
)

EVALUATORS: tuple[Evaluator, ...] = (
    bleu,
    sentence_bleu,
    chrf,
    ter,
    rouge_1,
    rouge_2,
    rouge_l,
    rouge_lsum,
    meteor,
    edit_distance,
    perplexity,
    bertscore,
    embedding_similarity,
)
"""Every evaluator of the text pack."""

__all__ = ["EVALUATORS"]
