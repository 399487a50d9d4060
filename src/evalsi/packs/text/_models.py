"""BERTScore and embedding similarity: metrics that need a local neural model.

evalsi never downloads a model while scoring, so both take the model as a local directory
(``--param embedding-similarity.model=/models/all-MiniLM-L6-v2``). Without their library
(``pip install 'evalsi[text-models]'``: bert-score, sentence-transformers) or without a model,
every record is SKIPPED with a reason that says what to install or set: the other metrics of
a run still score. The model loads on the first record, once per bind.

These are thin adapters over the libraries' own scoring; they were tested here only with
stand-in models (no real model can be fetched on the build machines).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, ClassVar

from evalsi.core import ParamError, Record, Score, UserError, expand_home
from evalsi.evaluators import Skip
from evalsi.packs._declare import check_at_least
from evalsi.packs.text._inputs import hypothesis, references

MODELS_EXTRA = "pip install 'evalsi[text-models]'"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # imported already, without a spec (a stand-in module)
        return True
    except ImportError:
        return False


def _is_dir(path: str) -> bool:
    """Whether ``path`` names a directory; ``~nosuchuser/...`` names none (expanding it raises)."""
    try:
        return expand_home(path).is_dir()
    except (UserError, OSError, ValueError):
        return False


class LocalModelMetric:
    """Shared checks: the library is installed, the model is a local directory."""

    metric_name: ClassVar[str] = ""
    library: ClassVar[str] = ""  # the import name
    package: ClassVar[str] = ""  # the PyPI name
    example_model: ClassVar[str] = ""

    def __init__(self, model: str) -> None:
        self._model_dir = model
        self._loaded: Any = None
        if model and not _is_dir(model):
            raise ParamError(
                f"{self.metric_name}: param 'model' must be a local model directory; "
                f"{model!r} is not a directory (models are never downloaded)"
            )
        self.why_not = ""
        if not _installed(self.library):
            self.why_not = (
                f"{self.metric_name} needs the {self.package} library, which is not "
                f"installed: {MODELS_EXTRA}"
            )
        elif not model:
            self.why_not = (
                f"no local model: set param model to a local {self.package} model directory, "
                f"e.g. --param {self.metric_name}.model=/models/{self.example_model}"
            )

    def texts(self, record: Record) -> tuple[str, list[str]]:
        if self.why_not:
            raise Skip(self.why_not)
        return hypothesis(record, self.metric_name), references(record, self.metric_name)

    def model(self) -> Any:
        if self._loaded is None:
            self._loaded = self.load(importlib.import_module(self.library))
        return self._loaded

    def load(self, library: Any) -> Any:
        raise NotImplementedError


class EmbeddingSimilarity(LocalModelMetric):
    """Cosine similarity of output and reference embeddings with a local model, -1..1.

    A sentence-transformers model; with several references the closest counts.

    Args:
        model: a local sentence-transformers model directory.
    """

    metric_name = "embedding-similarity"
    library = "sentence_transformers"
    package = "sentence-transformers"
    example_model = "all-MiniLM-L6-v2"

    def __init__(self, *, model: str = "") -> None:
        super().__init__(model)

    def load(self, library: Any) -> Any:
        return library.SentenceTransformer(
            str(Path(self._model_dir).expanduser()), device="cpu", local_files_only=True
        )

    def __call__(self, record: Record) -> Score:
        hyp, refs = self.texts(record)
        vectors = self.model().encode(
            [hyp, *refs], convert_to_numpy=True, normalize_embeddings=True
        )
        sims = vectors[1:] @ vectors[0]
        best = int(sims.argmax())
        how = f"closest of {len(refs)} references: reference {best + 1}" if len(refs) > 1 else ""
        return Score(number=float(sims[best]), explanation=how)


class BertScore(LocalModelMetric):
    """BERTScore F1 with a local model (precision and recall as extra metrics).

    bert-score's ``BERTScorer``; with several references the best counts, as bert-score does.

    Args:
        model: a local Hugging Face model directory (e.g. roberta-large).
        num_layers: which hidden layer's embeddings to use (bert-score's table: 17 for
            roberta-large, 9 for bert-base-uncased); required with ``model``.
    """

    metric_name = "bertscore"
    library = "bert_score"
    package = "bert-score"
    example_model = "roberta-large"

    def __init__(self, *, model: str = "", num_layers: int | None = None) -> None:
        super().__init__(model)
        if model and num_layers is None:
            raise ParamError(
                "bertscore: param 'num_layers' is required with a local model "
                "(17 for roberta-large, 9 for bert-base-uncased)"
            )
        if num_layers is not None:
            check_at_least("bertscore", "num_layers", num_layers, 1)
        self._layers = num_layers

    def load(self, library: Any) -> Any:
        return library.BERTScorer(
            model_type=str(Path(self._model_dir).expanduser()),
            num_layers=self._layers,
            device="cpu",
        )

    def __call__(self, record: Record) -> list[Score]:
        hyp, refs = self.texts(record)
        precision, recall, f1 = self.model().score([hyp], [refs])
        return [
            Score(number=float(f1[0])),
            Score(name="bertscore-precision", number=float(precision[0])),
            Score(name="bertscore-recall", number=float(recall[0])),
        ]
