"""Personal data in text: emails, phone numbers, card numbers, IBANs, IPv4 addresses, US SSNs.

Each detector yields ``Finding`` values. A regex finds candidates; a check then removes the
look-alikes a regex cannot: card numbers must pass the Luhn check and start with a known
issuer prefix, IBANs must have their country's length and pass the ISO 13616 mod-97 check,
phone numbers must hold a plausible count of digits. Every pattern is anchored on both sides so
that a run of digits is read whole: a 16-digit id inside a longer number never counts.

Example:
    >>> [f.kind for f in find_pii("Pay 4111 1111 1111 1111 or mail jane@example.com")]
    ['credit-card', 'email']
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    """One match: its kind, where it is, the raw text (never stored) and a detail."""

    kind: str
    start: int
    end: int
    text: str
    detail: str = ""


# -- card numbers ----------------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w.])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?!\w)(?![ -]\d)(?!\.\d)")


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of a string of digits.

    Example:
        >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
        (True, False)
    """
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def card_brand(digits: str) -> str | None:
    """The card network whose issuer prefix and length ``digits`` has, or None."""
    n = len(digits)
    p2, p3, p4, p6 = int(digits[:2]), int(digits[:3]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4" and n in (13, 16, 19):
        return "Visa"
    if n == 16 and (51 <= p2 <= 55 or 2221 <= p4 <= 2720):
        return "Mastercard"
    if n == 15 and p2 in (34, 37):
        return "American Express"
    if n in (16, 19) and (p4 == 6011 or p2 == 65 or 644 <= p3 <= 649 or 622126 <= p6 <= 622925):
        return "Discover"
    if 16 <= n <= 19 and 3528 <= p4 <= 3589:
        return "JCB"
    if 14 <= n <= 19 and (300 <= p3 <= 305 or p4 == 3095 or p2 in (36, 38, 39)):
        return "Diners Club"
    if 16 <= n <= 19 and p2 == 62:
        return "UnionPay"
    if 13 <= n <= 19 and (p2 == 50 or 56 <= p2 <= 69):
        return "Maestro"
    return None


def find_cards(text: str) -> Iterator[Finding]:
    """Payment card numbers: 13–19 digits (spaces or dashes allowed), Luhn-valid, known issuer."""
    for m in _CARD.finditer(text):
        digits = m.group().replace(" ", "").replace("-", "")
        brand = card_brand(digits)
        if brand is not None and luhn_valid(digits):
            yield Finding("credit-card", m.start(), m.end(), m.group(), brand)


# -- IBANs -----------------------------------------------------------------------------------

IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
"""Country code → IBAN length (the SWIFT IBAN registry), for the countries that use IBANs."""

_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")


def iban_valid(iban: str) -> bool:
    """The ISO 13616 check of a compact IBAN: its country's length and mod 97 == 1.

    Example:
        >>> iban_valid("GB82WEST12345698765432"), iban_valid("GB82WEST12345698765433")
        (True, False)
    """
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum() or not iban.isascii():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _cut(raw: str, length: int) -> int | None:
    """Where ``raw`` holds ``length`` characters other than spaces, or None if it never does."""
    seen = 0
    for end, ch in enumerate(raw, 1):
        seen += ch != " "
        if seen == length:
            return end
    return None


def find_ibans(text: str) -> Iterator[Finding]:
    """IBANs in print (groups of four) or compact form, upper case, of a known country."""
    pos = 0
    while (m := _IBAN.search(text, pos)) is not None:
        pos = m.start() + 1
        raw = m.group()
        length = IBAN_LENGTHS.get(raw[:2])
        if length is None:
            continue
        # The pattern is greedy: cut the match after the country's number of characters, so
        # an upper-case word or the next IBAN right after this one do not spoil it.
        end = _cut(raw, length)
        if end is None or (end < len(raw) and raw[end] != " "):
            continue
        compact = raw[:end].replace(" ", "")
        if iban_valid(compact):
            pos = m.start() + end
            yield Finding("iban", m.start(), pos, raw[:end], compact[:2])


# -- emails, phones, IPv4, SSNs --------------------------------------------------------------

Detector = Callable[[str], Iterator[Finding]]


def _every_match(kind: str, pattern: re.Pattern[str]) -> Detector:
    """A detector for a pattern whose every match is a finding (no check after the regex)."""

    def find(text: str) -> Iterator[Finding]:
        for m in pattern.finditer(text):
            yield Finding(kind, m.start(), m.end(), m.group())

    return find


_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])"
)
find_emails = _every_match("email", _EMAIL)  # local@domain.tld, a letters-only top-level domain


# International: "+" then digit groups joined by one space, dot or dash, or by parentheses
# around a group ("+44 (0)20 ..."). Possessive quantifiers keep the match linear on long runs.
_PHONE_INTL = re.compile(r"(?<![\w+])\+\d++(?:(?:[ .-]|[ .-]?\(|\)[ .-]?)\d++)*+(?![\w])")
# North American (NANP): area code and exchange start with 2-9.
_PHONE_NANP = re.compile(
    r"(?<![\w+(.-])(?:1[ .-]?)?(?:\([2-9]\d\d\)[ .-]?|[2-9]\d\d[ .-])[2-9]\d\d[ .-]\d{4}"
    r"(?!\w)(?![ .-]?\d)"
)
# National with a trunk 0 (UK 020 7946 0958, FR 06 12 34 56 78, DE 030 12345678): one
# separator kind throughout, 10 or 11 digits.
_PHONE_TRUNK = re.compile(r"(?<![\w+.-])0\d{1,4}([ .-])\d{2,8}(?:\1\d{2,8}){0,3}(?!\w)(?![ .-]\d)")


def _digit_count(text: str) -> int:
    return sum(c.isdigit() for c in text)


def find_phones(text: str) -> Iterator[Finding]:
    """Phone numbers: international (+CC, 8–15 digits), NANP, or national with a trunk 0."""
    for m in _PHONE_INTL.finditer(text):
        raw = m.group()
        digits = _digit_count(raw)
        if not 8 <= digits <= 15 or raw.count("(") != raw.count(")"):
            continue
        if raw[1] in "17" and digits != 11:  # +1 (NANP) and +7 numbers have exactly 11 digits
            continue  # "+12 345 678 USD" is an amount, not a phone
        yield Finding("phone", m.start(), m.end(), raw, "international")
    for m in _PHONE_NANP.finditer(text):
        yield Finding("phone", m.start(), m.end(), m.group(), "North American")
    for m in _PHONE_TRUNK.finditer(text):
        if 10 <= _digit_count(m.group()) <= 11:
            yield Finding("phone", m.start(), m.end(), m.group(), "national")


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)")
find_ipv4 = _every_match("ipv4", _IPV4)  # every address, loopback and private ones included


_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w]|-\d)")
find_ssns = _every_match("ssn", _SSN)  # US, in the dashed form AAA-GG-SSSS, valid ranges only

PII_DETECTORS: dict[str, Detector] = {
    "iban": find_ibans,
    "credit-card": find_cards,
    "email": find_emails,
    "ssn": find_ssns,
    "phone": find_phones,
    "ipv4": find_ipv4,
}
"""The personal-data detectors, in priority order (an earlier kind wins an overlap)."""


def resolve_overlaps(findings: list[Finding], priority: list[str]) -> list[Finding]:
    """Keep one finding per stretch of text: the higher-priority kind, then the longer match."""
    rank = {kind: i for i, kind in enumerate(priority)}
    ordered = sorted(findings, key=lambda f: (rank.get(f.kind, len(rank)), f.start - f.end))
    # The kept stretches never overlap, so sorted by start they are sorted by end too: a new
    # finding need only be checked against its two neighbours (n log n, not n²).
    starts: list[int] = []
    kept: list[Finding] = []
    for f in ordered:
        i = bisect.bisect_right(starts, f.start)
        if i and kept[i - 1].end > f.start:
            continue
        if i < len(kept) and kept[i].start < f.end:
            continue
        starts.insert(i, f.start)
        kept.insert(i, f)
    return kept


def find_pii(text: str, kinds: tuple[str, ...] = tuple(PII_DETECTORS)) -> list[Finding]:
    """The personal data of ``kinds`` in ``text``, without overlaps, in text order."""
    found = [f for kind in kinds for f in PII_DETECTORS[kind](text)]
    return resolve_overlaps(found, list(PII_DETECTORS))
