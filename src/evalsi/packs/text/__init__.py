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
from evalsi.evaluators import Evaluator
from evalsi.packs._declare import builtin, lower, number
from evalsi.packs.text._corpus import Bleu, Chrf, SentenceBleu, Ter
from evalsi.packs.text._edit import EditDistance
from evalsi.packs.text._meteor import Meteor
from evalsi.packs.text._models import BertScore, EmbeddingSimilarity
from evalsi.packs.text._perplexity import perplexity as _perplexity
from evalsi.packs.text._rouge import Rouge1, Rouge2, RougeL, RougeLsum

_DATA = "examples/text/translations.jsonl"
_SUMMARIES = "examples/text/summaries.jsonl"


def _declare(
    name: str,
    target: object,
    *outputs: OutputSpec,
    scope: Scope = Scope.RECORD,
    requires: tuple[str, ...] = ("output", "reference"),
    example: str = "",
) -> Evaluator:
    example = example or f"evalsi eval --data {_DATA} --evaluators {name}"
    return builtin("text", name, *outputs, requires=requires, scope=scope, example=example)(target)


def _prf(name: str, what: str) -> list[OutputSpec]:
    return [
        number(name, f"{what} F-measure, 0-1"),
        number(f"{name}-precision", f"{what} precision, 0-1"),
        number(f"{name}-recall", f"{what} recall, 0-1"),
    ]


bleu = _declare(
    "bleu",
    Bleu,
    number("bleu", "corpus BLEU (sacrebleu), 0-100", (0.0, 100.0)),
    scope=Scope.DATASET,
)
sentence_bleu = _declare(
    "sentence-bleu",
    SentenceBleu,
    number("sentence-bleu", "sentence BLEU, effective order (sacrebleu), 0-100", (0.0, 100.0)),
)
chrf = _declare(
    "chrf",
    Chrf,
    number("chrf", "corpus chrF (word_order=2: chrF++) (sacrebleu), 0-100", (0.0, 100.0)),
    scope=Scope.DATASET,
    example=f"evalsi eval --data {_DATA} --evaluators chrf --param chrf.word_order=2",
)
ter = _declare(
    "ter",
    Ter,
    lower("ter", "corpus translation edit rate (sacrebleu), >= 0"),
    scope=Scope.DATASET,
)
rouge_1, rouge_2, rouge_l, rouge_lsum = (
    _declare(
        name, cls, *_prf(name, what), example=f"evalsi eval --data {_SUMMARIES} --evaluators {name}"
    )
    for name, cls, what in (
        ("rouge-1", Rouge1, "ROUGE-1"),
        ("rouge-2", Rouge2, "ROUGE-2"),
        ("rouge-l", RougeL, "ROUGE-L"),
        ("rouge-lsum", RougeLsum, "ROUGE-Lsum (sentences split on newlines)"),
    )
)
meteor = _declare("meteor", Meteor, number("meteor", "METEOR (NLTK, needs WordNet), 0-1"))
edit_distance = _declare(
    "edit-distance",
    EditDistance,
    lower("edit-distance", "Levenshtein distance (characters or words)"),
    number("edit-similarity", "1 - distance / max(length), 0-1"),
)
perplexity = _declare(
    "perplexity",
    _perplexity,
    lower("perplexity", "exp(-mean token logprob) from given logprobs, >= 1"),
    requires=(),
    example="evalsi eval --data examples/text/logprobs.jsonl --evaluators perplexity",
)
bertscore = _declare(
    "bertscore",
    BertScore,
    *_prf("bertscore", "BERTScore (local model)"),
    example=f"evalsi eval --data {_DATA} --evaluators bertscore "
    "--param bertscore.model=/models/roberta-large --param bertscore.num_layers=17",
)
embedding_similarity = _declare(
    "embedding-similarity",
    EmbeddingSimilarity,
    number("embedding-similarity", "cosine similarity of embeddings (local model)", (-1.0, 1.0)),
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
