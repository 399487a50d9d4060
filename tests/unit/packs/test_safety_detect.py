"""The safety pack's detectors on real-looking fixtures, and the near misses they must ignore.

Card numbers are the networks' published test numbers (Visa 4111 1111 1111 1111, Mastercard
5555 5555 5555 4444, ...); IBANs are the registry's and banks' published examples
(GB82 WEST 1234 5698 7654 32, ...). Keys are the providers' documented example keys or
random-looking strings in their formats, never real credentials.
"""

from __future__ import annotations

import pytest

from evalsi.packs.safety import AllowList, iban_valid, luhn_valid, mask, scan
from evalsi.packs.safety._detect import card_brand, find_pii

TEST_CARDS = {
    "4111111111111111": "Visa",
    "4012888888881881": "Visa",
    "4222222222222": "Visa",
    "5555555555554444": "Mastercard",
    "5105105105105100": "Mastercard",
    "2223003122003222": "Mastercard",
    "378282246310005": "American Express",
    "371449635398431": "American Express",
    "6011111111111117": "Discover",
    "6011000990139424": "Discover",
    "3530111333300000": "JCB",
    "3566002020360505": "JCB",
    "30569309025904": "Diners Club",
    "38520000023237": "Diners Club",
    "6200000000000005": "UnionPay",
}

TEST_IBANS = [
    "GB82 WEST 1234 5698 7654 32",
    "GB29 NWBK 6016 1331 9268 19",
    "DE89 3704 0044 0532 0130 00",
    "FR14 2004 1010 0505 0001 3M02 606",
    "NL91 ABNA 0417 1643 00",
    "BE68 5390 0754 7034",
    "CH93 0076 2011 6238 5295 7",
    "ES91 2100 0418 4502 0005 1332",
    "IT60 X054 2811 1010 0000 0123 456",
    "AT61 1904 3002 3457 3201",
    "NO93 8601 1117 947",
    "SA03 8000 0000 6080 1016 7519",
]


def kinds(text: str, which: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    found = scan(text, which) if which else scan(text)
    return [(f.kind, f.text) for f in found]


# -- cards ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "brand"), TEST_CARDS.items())
def test_published_test_cards_are_found_with_their_brand(number: str, brand: str) -> None:
    assert luhn_valid(number)
    assert card_brand(number) == brand
    grouped = " ".join(number[i : i + 4] for i in range(0, len(number), 4))
    for shown in (number, grouped, grouped.replace(" ", "-")):
        (finding,) = scan(f"Charge it to {shown}, thanks.", ["credit-card"])
        assert (finding.text, finding.detail) == (shown, brand)


def test_any_grouping_by_single_spaces_or_dashes_is_read() -> None:
    for shown in ("4111 11111111 1111", "41-11-11-11-11-11-11-11", "4111 1111 1111 111 1"):
        assert [f.text for f in scan(f"card {shown}.", ["credit-card"])] == [shown]


@pytest.mark.parametrize(
    "text",
    [
        "order id 4111111111111112",  # fails Luhn
        "4111.1111.1111.1111",  # dots are not card separators (documented)
        "tracking 1234567812345678",  # fails Luhn, no issuer
        "ref 9999999999999995",  # passes Luhn, no card network starts with 9
        "id 0000000000000000",  # passes Luhn, no issuer
        "serial 41111111111111111",  # 17 digits: no Visa length
        "account 124111111111111111",  # a valid card inside a longer number
        "pi is 3.14111111111111111",  # digits of a decimal
        "4111 1111 1111 1111 2",  # the run goes on past the card
        "call 555 555 5555 4444",  # a different grouping of other digits fails Luhn
    ],
)
def test_card_near_misses_do_not_match(text: str) -> None:
    assert scan(text, ["credit-card"]) == []


def test_luhn_against_hand_computed_check_digits() -> None:
    # 7992739871 is the classic Luhn example: its check digit is 3
    assert luhn_valid("79927398713")
    assert [d for d in "0123456789" if luhn_valid("7992739871" + d)] == ["3"]


# -- IBANs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("iban", TEST_IBANS)
def test_published_ibans_are_found_printed_or_compact(iban: str) -> None:
    compact = iban.replace(" ", "")
    assert iban_valid(compact)
    for shown in (iban, compact):
        (finding,) = scan(f"Please wire it to {shown}. Thanks", ["iban"])
        assert finding.text == shown
        assert finding.detail == compact[:2]


@pytest.mark.parametrize(
    "text",
    [
        "GB82 WEST 1234 5698 7654 33",  # wrong check
        "GB28 WEST 1234 5698 7654 32",  # swapped check digits
        "GB82 WEST 1234 5698 7654 3",  # one character short for GB
        "GB82 WEST 1234 5698 7654 321",  # one too many
        "ZZ82 WEST 1234 5698 7654 32",  # no such country
        "gb82 west 1234 5698 7654 32",  # lower case is not read
        "XGB82WEST12345698765432",  # glued to a word
    ],
)
def test_iban_near_misses_do_not_match(text: str) -> None:
    assert scan(text, ["iban"]) == []


def test_ibans_one_after_another_are_each_found() -> None:
    text = " ".join(i.replace(" ", "") for i in TEST_IBANS[:6])
    assert len(scan(text, ["iban"])) == 6


def test_iban_is_not_also_a_card_or_phone() -> None:
    assert kinds("IBAN: DE89 3704 0044 0532 0130 00") == [("iban", "DE89 3704 0044 0532 0130 00")]


# -- emails and phones ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "email",
    ["jane.doe@example.com", "j.o+tag@mail.example.co.uk", "X_Y-Z%1@sub-domain.example.org"],
)
def test_emails(email: str) -> None:
    assert kinds(f"Write to <{email}>.", ("email",)) == [("email", email)]


@pytest.mark.parametrize(
    "text", ["user@localhost", "@handle on social", "a@b.c", "name@example.123", "x@-bad.com"]
)
def test_email_near_misses(text: str) -> None:
    assert scan(text, ["email"]) == []


@pytest.mark.parametrize(
    "phone",
    [
        "+1 (415) 555-2671",
        "+1 415 555 2671",
        "+44 20 7946 0958",
        "+44 (0)20 7946 0958",
        "+33 1 42 68 53 00",
        "+49 30 901820",
        "+81-3-1234-5678",
        "+8613812345678",
        "(415) 555-0132",
        "212.555.0173",
        "1-800-555-0199",
        "020 7946 0958",
        "06 12 34 56 78",
        "07700 900123",
        "030 12345678",
    ],
)
def test_phones(phone: str) -> None:
    assert kinds(f"Call me on {phone} tomorrow.", ("phone",)) == [("phone", phone)]


@pytest.mark.parametrize(
    "text",
    [
        "released on 2023-01-15",
        "on 01.02.2023 at 10:30",
        "version 1.2.3.4",
        "123-456-7890",  # exchange 456 ok but area code 123 is not NANP
        "total 1,234,567",
        "+12345",  # too few digits
        "+1234567890123456",  # more than E.164's 15 digits
        "code 0123",
        "ISBN 978-0-306-40615-7",
        "9018 2034",  # national without a trunk 0: not read
        "030 901820",  # fewer than 10 digits
    ],
)
def test_phone_near_misses(text: str) -> None:
    assert scan(text, ["phone"]) == []


# -- IPv4 and SSN (opt-in kinds) ---------------------------------------------------------------


def test_ipv4_and_ssn() -> None:
    text = "host 192.168.10.1, version 1.2.3.4.5, ssn 123-45-6789, not 000-12-3456 or 666-12-3456"
    assert kinds(text, ("ipv4", "ssn")) == [("ipv4", "192.168.10.1"), ("ssn", "123-45-6789")]
    assert scan("out of range 256.1.1.1 and 10.0.0", ["ipv4"]) == []


# -- keys ---------------------------------------------------------------------------------------

KEYS = {
    "AKIAIOSFODNN7EXAMPLE": "AWS access key id",
    "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": "GitHub token",
    "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx": "Slack token",
    "sk-proj-Ab3dEf9hIjK1mNoPqR5tUvWxYz0123456789": "OpenAI key",
    "sk-T3BlbkFJx9Yq7Lm2Np4Rs6Tv8Wx0Za1Bc3De5Fg7Hi9Jk": "OpenAI key",
    "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7Zx9Yw8Vu7Ts6Rq5": "Anthropic key",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q": "Google API key",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc": "Stripe key",
    "glpat-xY7zA9bC3dE5fG1hI2jK": "GitLab token",
    "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789": "Hugging Face token",
}


@pytest.mark.parametrize(("key", "provider"), KEYS.items())
def test_provider_keys(key: str, provider: str) -> None:
    (finding,) = scan(f'config = {{"token": "{key}"}}', ["api-key"])
    assert (finding.text, finding.detail) == (key, provider)
    shown = mask(finding)
    assert key not in shown
    assert shown.endswith(f"({len(key)} chars)")


def test_aws_secret_key_is_found_only_beside_its_name() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    (finding,) = scan(f"aws_secret_access_key = {secret}", ["api-key"])
    assert finding.text == secret
    assert mask(finding) == "…(40 chars)"
    assert scan(f"checksum {secret}", ["api-key"]) == []


@pytest.mark.parametrize(
    "text",
    [
        "pip install sk-learn-extensions-for-everyone",  # sk- but words, not a key
        "the AKIA prefix alone",
        "ghp_short",
        "AIza is how Google keys start",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
)
def test_key_near_misses(text: str) -> None:
    assert scan(text, ["api-key", "jwt", "private-key"]) == []


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def test_jwt_needs_a_json_header() -> None:
    (finding,) = scan(f"Authorization: Bearer {JWT}", ["jwt"])
    assert finding.text == JWT
    assert finding.detail == "HS256"
    assert mask(finding) == f"eyJ…({len(JWT)} chars)"
    assert scan("eyJzzzzzzzzz.eyJzzzzzzzzz.zzzzzzzzzzzzzz", ["jwt"]) == []


def test_private_key_blocks_whole_or_cut_off() -> None:
    block = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq3mZKp\nq9yWq2vN8sT0uX\n"
        "-----END RSA PRIVATE KEY-----"
    )
    (finding,) = scan(f"here it is:\n{block}\nkeep it safe", ["private-key"])
    assert finding.text == block
    assert finding.detail == "RSA"
    assert mask(finding) == f"-----BEGIN RSA PRIVATE KEY-----…({len(block)} chars)"
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
    (finding,) = scan(cut, ["private-key"])
    assert finding.text == cut
    assert scan("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq", ["private-key"]) == []


# -- overlaps, masking, allow-list -----------------------------------------------------------------


def test_every_kind_in_one_text_without_double_counting() -> None:
    text = (
        "Jane (jane.doe@example.com, +44 20 7946 0958) paid with 4111 1111 1111 1111 from "
        "GB82 WEST 1234 5698 7654 32; her key AKIAIOSFODNN7EXAMPLE and token " + JWT
    )
    assert [k for k, _ in kinds(text)] == [
        "email",
        "phone",
        "credit-card",
        "iban",
        "api-key",
        "jwt",
    ]
    assert [f.kind for f in find_pii(text)] == ["email", "phone", "credit-card", "iban"]


def test_masks_keep_only_what_identifies_the_kind() -> None:
    text = (
        "jane.doe@example.com, +44 20 7946 0958, 4111-1111-1111-1111, GB82WEST12345698765432, "
        "192.168.10.1, 123-45-6789"
    )
    found = scan(text, ["email", "phone", "credit-card", "iban", "ipv4", "ssn"])
    assert [mask(f) for f in found] == [
        "j***@e***.com",
        "+** ** **** **58",
        "****-****-****-1111",
        "GB******************32",
        "192.*.*.*",
        "***-**-6789",
    ]


def test_allow_list_compares_per_kind() -> None:
    allow = AllowList(["4111-1111-1111-1111", "@example.com", "+1 415 555 2671"])
    text = "4111111111111111 ops@EXAMPLE.com eve@evil.test (415) 555-2671 +14155552671"
    verdicts = [(f.kind, allow.allows(f)) for f in scan(text)]
    assert verdicts == [
        ("credit-card", True),
        ("email", True),
        ("email", False),
        ("phone", False),  # the number without its country code is another string of digits
        ("phone", True),
    ]
