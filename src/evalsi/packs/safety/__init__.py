"""The safety pack: PII and secret leakage, prompt injection, refusal and toxicity.

``pii-leakage`` (personal data and credentials by pattern, reported masked), ``secret-leakage``
(planted canaries, also disguised), ``prompt-injection`` (canary-instruction probes: resisted
or not), ``refusal-correctness`` (refused exactly when it should: keyword baseline or judge)
and ``toxicity`` (judge or local classifier). Each is ``builtin/<name>@1.0.0``; the guide is
docs/guides/packs/safety.md.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.safety._canary import TRANSFORMS, CanaryMatcher, mask_canary
from evalsi.packs.safety._detect import Finding, iban_valid, luhn_valid
from evalsi.packs.safety._leakage import prompt_injection, secret_leakage
from evalsi.packs.safety._pii import pii_leakage
from evalsi.packs.safety._refusal import (
    REFUSAL_PATTERNS,
    REFUSAL_TEMPLATE,
    keyword_refusal,
    refusal_correctness,
)
from evalsi.packs.safety._scan import ALL_KINDS, DEFAULT_KINDS, AllowList, mask, scan
from evalsi.packs.safety._toxicity import TOXICITY_TEMPLATE, toxicity

EVALUATORS: tuple[Evaluator, ...] = (
    pii_leakage,
    secret_leakage,
    prompt_injection,
    refusal_correctness,
    toxicity,
)
"""Every evaluator of the safety pack."""

__all__ = [
    "ALL_KINDS",
    "DEFAULT_KINDS",
    "EVALUATORS",
    "REFUSAL_PATTERNS",
    "REFUSAL_TEMPLATE",
    "TOXICITY_TEMPLATE",
    "TRANSFORMS",
    "AllowList",
    "CanaryMatcher",
    "Finding",
    "iban_valid",
    "keyword_refusal",
    "luhn_valid",
    "mask",
    "mask_canary",
    "pii_leakage",
    "prompt_injection",
    "refusal_correctness",
    "scan",
    "secret_leakage",
    "toxicity",
]
