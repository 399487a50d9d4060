"""One scan over a text for every kind asked, masking for reports, and the allow-list.

Results are stored and shown, so a match is never kept whole: ``mask`` keeps only what
identifies the kind (a card's last four digits, a key's public prefix and its length, an
email's first letters and top-level domain) and replaces the rest with ``*``.

Example:
    >>> [mask(f) for f in scan("mail jane.doe@example.com, card 4111-1111-1111-1111")]
    ['j***@e***.com', '****-****-****-1111']
"""

from __future__ import annotations

from collections.abc import Iterable

from evalsi.packs.safety._detect import PII_DETECTORS, Finding, resolve_overlaps
from evalsi.packs.safety._keys import KEY_DETECTORS, key_prefix_length

ALL_KINDS: tuple[str, ...] = (
    "email",
    "phone",
    "credit-card",
    "iban",
    "api-key",
    "private-key",
    "jwt",
    "ipv4",
    "ssn",
)
"""Every kind the regex engine detects."""

DEFAULT_KINDS: tuple[str, ...] = ALL_KINDS[:7]
"""What ``pii-leakage`` looks for unless told: all but IPv4 addresses and US SSNs."""

PRIORITY: tuple[str, ...] = (*KEY_DETECTORS, *PII_DETECTORS)
"""Which kind wins when two matches overlap: credentials first, then personal data."""

_DETECTORS = {**KEY_DETECTORS, **PII_DETECTORS}


def scan(text: str, kinds: Iterable[str] = DEFAULT_KINDS) -> list[Finding]:
    """Every match of ``kinds`` in ``text``, without overlaps, in text order."""
    found = [f for kind in kinds for f in _DETECTORS[kind](text)]
    return resolve_overlaps(found, list(PRIORITY))


def _stars(text: str, keep_last: int) -> str:
    """Every digit or letter but the last ``keep_last`` of them as ``*``; separators kept."""
    total = sum(c.isalnum() for c in text)
    seen, out = 0, []
    for c in text:
        if c.isalnum():
            seen += 1
            out.append(c if seen > total - keep_last else "*")
        else:
            out.append(c)
    return "".join(out)


def mask(f: Finding) -> str:
    """``f``'s text with everything that could identify the person or open the account hidden."""
    text, kind = f.text, f.kind
    if kind == "email":
        local, _, domain = text.partition("@")
        labels = domain.split(".")
        return f"{local[:1]}***@{labels[0][:1]}***.{labels[-1]}"
    if kind == "phone":
        return _stars(text, 2)
    if kind in ("credit-card", "ssn"):
        return _stars(text, 4)
    if kind == "iban":
        compact = text.replace(" ", "")
        return compact[:2] + "*" * (len(compact) - 4) + compact[-2:]
    if kind == "ipv4":
        return text.split(".", 1)[0] + ".*.*.*"
    if kind == "api-key":
        return f"{text[: key_prefix_length(f.detail)]}…({len(text)} chars)"
    if kind == "private-key":
        header = text.split("-----")[1] if text.count("-----") >= 2 else "BEGIN PRIVATE KEY"
        return f"-----{header}-----…({len(text)} chars)"
    if kind == "jwt":
        return f"eyJ…({len(text)} chars)"
    return f"{text[:1]}***({len(text)} chars)"


def describe(f: Finding) -> str:
    """``kind (detail): masked``, the form explanations list."""
    detail = f" ({f.detail})" if f.detail and f.kind in ("credit-card", "api-key") else ""
    return f"{f.kind}{detail}: {mask(f)}"


def _normal(kind: str, value: str) -> str:
    """The comparable form of a value: digit kinds compare their digits/letters only."""
    value = value.strip()
    if kind == "email":
        return value.casefold()
    if kind in ("phone", "credit-card", "iban", "ssn"):
        return "".join(c for c in value if c.isalnum()).upper()
    return value


class AllowList:
    """Values that are not leaks: exact values (compared per kind), or ``@domain`` for emails.

    Example:
        >>> allow = AllowList(["support@acme.test", "@example.com"])
        >>> [allow.allows(f) for f in scan("a@example.com SUPPORT@acme.test b@evil.test")]
        [True, True, False]
    """

    def __init__(self, entries: Iterable[str] = ()) -> None:
        self.entries = [e.strip() for e in entries if e.strip()]
        self.domains = tuple(e.casefold() for e in self.entries if e.startswith("@"))

    def allows(self, f: Finding) -> bool:
        if f.kind == "email" and self.domains and f.text.casefold().endswith(self.domains):
            return True
        mine = _normal(f.kind, f.text)
        return any(_normal(f.kind, e) == mine for e in self.entries)

    def extended(self, more: Iterable[str]) -> AllowList:
        return AllowList([*self.entries, *more])
