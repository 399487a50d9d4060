"""Evidence: a run sealed into a bundle anyone can check offline — the test plan registered
before the first task, what happened, how it was judged — and the commands that check it:
validate, gate, rescore, sign (docs/guides/evidence.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.evidence._archive import archive_bundle, archived_bundles, fetch_bundle
    from evalsi.evidence._format import FORMAT, FORMAT_VERSION, MANIFEST, REQUIRED
    from evalsi.evidence._gate import GateOutcome, ThresholdResult, gate_bundle
    from evalsi.evidence._rescore import Difference, Rescore, rescore_bundle
    from evalsi.evidence._review import export_review, fingerprint
    from evalsi.evidence._review_import import (
        ImportResult,
        Refused,
        import_review,
        list_reviews,
    )
    from evalsi.evidence._signing import SignatureCheck, sign_manifest, verify_signature
    from evalsi.evidence._validate import Validation, validate_bundle
    from evalsi.evidence._write import Receiver, Written, check_output, write_bundle
    from evalsi.store import Review  # what ImportResult.accepted holds

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "REQUIRED",
    "Difference",
    "GateOutcome",
    "ImportResult",
    "Receiver",
    "Refused",
    "Rescore",
    "Review",
    "SignatureCheck",
    "ThresholdResult",
    "Validation",
    "Written",
    "archive_bundle",
    "archived_bundles",
    "check_output",
    "export_review",
    "fetch_bundle",
    "fingerprint",
    "gate_bundle",
    "import_review",
    "list_reviews",
    "rescore_bundle",
    "sign_manifest",
    "validate_bundle",
    "verify_signature",
    "write_bundle",
]

# Exports are imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
