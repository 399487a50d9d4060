"""Property tests: every valid card number or IBAN embedded in random text is found, and the
same number with one character changed is not (Luhn and mod-97 catch every single-character
substitution).

The generators compute check digits their own way (Luhn by the doubling table, IBAN check
digits as ``98 - n mod 97``), independently of the code under test.
"""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.packs.safety import scan
from evalsi.packs.safety._detect import IBAN_LENGTHS

# Text around the numbers: lower-case words and punctuation, so that nothing in it can glue
# onto a number (no digits, no upper case) or be a number itself.
FILLER = st.text(alphabet=string.ascii_lowercase + " ,.;:!?()'\n", max_size=40).map(
    lambda s: f"{s} "
)

_DOUBLED = [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]  # the Luhn table: 2d, minus 9 when above 9


def luhn_check_digit(payload: str) -> str:
    total = sum(_DOUBLED[int(d)] if i % 2 == 0 else int(d) for i, d in enumerate(reversed(payload)))
    return str(-total % 10)


PREFIXES = {  # an issuer prefix and a card length each network issues
    "4": 16,
    "51": 16,
    "2221": 16,
    "34": 15,
    "37": 15,
    "6011": 16,
    "3530": 16,
    "36": 14,
    "62": 16,
}


@st.composite
def cards(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(sorted(PREFIXES)))
    body = draw(
        st.text(
            alphabet=string.digits,
            min_size=PREFIXES[prefix] - len(prefix) - 1,
            max_size=PREFIXES[prefix] - len(prefix) - 1,
        )
    )
    payload = prefix + body
    return payload + luhn_check_digit(payload)


def grouped(number: str, sep: str) -> str:
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


@settings(max_examples=300)
@given(cards(), FILLER, FILLER, st.sampled_from(["", " ", "-"]))
def test_valid_cards_in_random_text_are_found(
    number: str, before: str, after: str, sep: str
) -> None:
    shown = grouped(number, sep)
    found = scan(before + shown + " " + after, ["credit-card"])
    assert [f.text for f in found] == [shown]


@settings(max_examples=300)
@given(cards(), FILLER, FILLER, st.data())
def test_a_card_with_one_digit_changed_is_not_found(
    number: str, before: str, after: str, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(number) - 1))
    digit = data.draw(st.sampled_from([d for d in string.digits if d != number[i]]))
    mutated = number[:i] + digit + number[i + 1 :]
    assert scan(before + mutated + " " + after, ["credit-card"]) == []


BBAN_ALPHABET = string.digits + string.ascii_uppercase


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country = draw(st.sampled_from(sorted(IBAN_LENGTHS)))
    size = IBAN_LENGTHS[country] - 4
    bban = draw(st.text(alphabet=BBAN_ALPHABET, min_size=size, max_size=size))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    return f"{country}{check:02d}{bban}"


@settings(max_examples=300)
@given(ibans(), FILLER, FILLER, st.booleans())
def test_valid_ibans_in_random_text_are_found(
    iban: str, before: str, after: str, printed: bool
) -> None:
    shown = grouped(iban, " ") if printed else iban
    found = scan(before + shown + " " + after, ["iban"])
    assert [f.text for f in found] == [shown]


@settings(max_examples=300)
@given(ibans(), FILLER, FILLER, st.data())
def test_an_iban_with_one_character_changed_is_not_found(
    iban: str, before: str, after: str, data: st.DataObject
) -> None:
    i = data.draw(st.integers(2, len(iban) - 1))  # the country code picks the length: keep it
    pool = string.digits if iban[i].isdigit() or i < 4 else string.ascii_uppercase
    char = data.draw(st.sampled_from([c for c in pool if c != iban[i]]))
    mutated = iban[:i] + char + iban[i + 1 :]
    assert scan(before + mutated + " " + after, ["iban"]) == []
