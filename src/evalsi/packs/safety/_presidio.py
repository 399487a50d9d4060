"""The optional Presidio engine of ``pii-leakage`` (the ``presidio`` extra plus a spaCy model).

Presidio adds named-entity recognition (people, places, organisations) and its own recognisers
for the personal-data kinds; credentials (API keys, private keys, JWTs) stay with the regex
engine, which Presidio has no recognisers for. Everything is checked when the evaluator is
bound: a missing library or spaCy model is a ``UserError`` naming what to install, never a
download at run time (Presidio would otherwise try to download ``en_core_web_lg`` itself).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from evalsi.core import UserError
from evalsi.packs.safety._detect import Finding

PRESIDIO_ENTITIES: dict[str, str] = {
    "email": "EMAIL_ADDRESS",
    "phone": "PHONE_NUMBER",
    "credit-card": "CREDIT_CARD",
    "iban": "IBAN_CODE",
    "ipv4": "IP_ADDRESS",
    "ssn": "US_SSN",
}
"""Our kind → Presidio's entity type, for the kinds Presidio recognises."""

_KINDS = {entity: kind for kind, entity in PRESIDIO_ENTITIES.items()}
INSTALL = "pip install 'evalsi[presidio]'"


def kind_of(entity: str) -> str:
    """Our kind for a Presidio entity type: ``EMAIL_ADDRESS`` → ``email``, ``PERSON`` →
    ``person``."""
    return _KINDS.get(entity, entity.lower().replace("_", "-"))


class PresidioEngine:
    """A Presidio ``AnalyzerEngine`` on a locally installed spaCy model.

    Args:
        entities: the Presidio entity types to report.
        model: an installed spaCy package name, or a directory holding a spaCy model.
        language: the language code the model is for.
        threshold: Presidio's score below which a match is dropped.

    Raises:
        UserError: presidio-analyzer or spaCy is not installed, or the model is not.
    """

    def __init__(
        self, entities: list[str], *, model: str, language: str = "en", threshold: float = 0.5
    ) -> None:
        try:  # by name: optional libraries without type stubs, imported only when asked for
            spacy_util = importlib.import_module("spacy.util")
            analyzer = importlib.import_module("presidio_analyzer")
            nlp_engine = importlib.import_module("presidio_analyzer.nlp_engine")
        except ImportError as e:
            raise UserError(
                f"pii-leakage engine 'presidio' needs presidio-analyzer and spaCy: {INSTALL}",
                hint="or use the default engine: --param pii-leakage.engine=regex",
            ) from e
        if not (spacy_util.is_package(model) or Path(model).is_dir()):
            raise UserError(
                f"pii-leakage engine 'presidio' needs the spaCy model {model!r}, which is not "
                f"installed: python -m spacy download {model}",
                hint="or set param spacy_model to an installed spaCy model or a model directory",
            )
        config: dict[str, Any] = {
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": language, "model_name": model}],
        }
        nlp = nlp_engine.NlpEngineProvider(nlp_configuration=config).create_engine()
        self.analyzer: Any = analyzer.AnalyzerEngine(nlp_engine=nlp, supported_languages=[language])
        self.entities = entities
        self.language = language
        self.threshold = threshold

    def find(self, text: str) -> list[Finding]:
        """Presidio's matches in ``text`` as findings (``detail`` holds its score)."""
        if not self.entities:
            return []
        results = self.analyzer.analyze(
            text=text,
            language=self.language,
            entities=self.entities,
            score_threshold=self.threshold,
        )
        return [
            Finding(
                kind_of(r.entity_type),
                r.start,
                r.end,
                text[r.start : r.end],
                f"presidio {r.score:.2f}",
            )
            for r in results
        ]
