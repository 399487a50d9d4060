"""The egress policy's decisions: every rule, in its order, on IPv4, IPv6, IPv4 inside IPv6 and
the legacy numeric forms, with ports, ranges and names; entries that cannot be parsed.

Classifications are checked against the standard library's ``ipaddress`` properties and the
legacy numeric forms against the C library's own parser (``getaddrinfo``), not against the
policy's own output."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from evalsi.connectors import EgressDenied, EgressPolicy, EgressRule, trusted_rule
from evalsi.connectors._egress import (
    METADATA_ADDRESSES,
    classify,
    literal_address,
    unwrap,
)
from evalsi.core import UserError

ip = ipaddress.ip_address
LOOPBACK_SERVER = EgressPolicy(listen_host="127.0.0.1")
EXPOSED_SERVER = EgressPolicy(listen_host="0.0.0.0")


def _rule(policy: EgressPolicy, url: str) -> str | None:
    """The rule refusing ``url`` under ``policy`` (static check), or None when allowed."""
    try:
        policy.check_url(url)
    except EgressDenied as e:
        return e.rule
    return None


# -- classification ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["169.254.1.1", "169.254.0.0", "169.254.255.255", "fe80::1", "febf:ffff::1"],
)
def test_link_local_as_the_standard_library_sees_it(text: str) -> None:
    assert ip(text).is_link_local
    assert classify(ip(text)) == "link-local"


@pytest.mark.parametrize("text", ["127.0.0.1", "127.255.255.254", "127.0.0.2", "::1"])
def test_loopback_as_the_standard_library_sees_it(text: str) -> None:
    assert ip(text).is_loopback
    assert classify(ip(text)) == "loopback"


@pytest.mark.parametrize("text", ["0.0.0.0", "0.1.2.3", "::"])
def test_addresses_that_reach_this_host_count_as_loopback(text: str) -> None:
    # Linux connects 0.0.0.0 (and ::) to the local host.
    assert classify(ip(text)) == "loopback"


@pytest.mark.parametrize(
    "text",
    [
        "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.1.1",
        "100.64.0.1", "100.127.255.255", "fc00::1", "fd12:3456::1",
        "192.0.2.2", "198.18.0.1", "240.0.0.1",
    ],
)  # fmt: skip
def test_private_and_reserved(text: str) -> None:
    assert not ip(text).is_global  # the standard library agrees none of these is global
    assert classify(ip(text)) == "private"


@pytest.mark.parametrize(
    "text", ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111"]
)
def test_public(text: str) -> None:
    assert ip(text).is_global
    assert classify(ip(text)) == "public"


def test_every_metadata_address_is_metadata_before_anything_else() -> None:
    for address in METADATA_ADDRESSES:
        assert classify(address) == "metadata"
    # 100.100.100.200 (Alibaba) sits in the shared range, 168.63.129.16 (Azure) in public space
    assert classify(ip("100.100.100.201")) == "private"
    assert classify(ip("168.63.129.17")) == "public"


@pytest.mark.parametrize(
    ("wrapped", "inner"),
    [
        ("::ffff:169.254.169.254", "169.254.169.254"),  # IPv4-mapped
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),  # NAT64 well-known prefix
        ("::a9fe:a9fe", "169.254.169.254"),  # the deprecated IPv4-compatible form
        ("2606:4700::1111", "2606:4700::1111"),  # a plain IPv6 address stays itself
        ("::1", "::1"),
    ],
)
def test_ipv4_inside_ipv6_is_judged_as_ipv4(wrapped: str, inner: str) -> None:
    assert unwrap(ip(wrapped)) == ip(inner)
    assert classify(ip(wrapped)) == classify(ip(inner))


@pytest.mark.parametrize(
    "form",
    ["2852039166", "0251.0376.0251.0376", "0xa9fea9fe", "169.254.43518", "127.1", "0x7f.1", "0"],
)
def test_legacy_numeric_forms_are_the_address_the_c_library_connects_to(form: str) -> None:
    expected = socket.getaddrinfo(form, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    assert literal_address(form) == ip(expected)


@pytest.mark.parametrize("name", ["example.com", "deadbeef", "1.2.3.4.example", "", "localhost"])
def test_names_are_not_literals(name: str) -> None:
    assert literal_address(name) is None


def test_bracketed_and_scoped_ipv6_literals() -> None:
    assert literal_address("[::1]") == ip("::1")
    scoped = literal_address("fe80::1%eth0")
    assert scoped is not None
    assert classify(scoped) == "link-local"


# -- the default rules ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy", [LOOPBACK_SERVER, EXPOSED_SERVER], ids=["loopback", "exposed"])
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://169.254.170.2/v2/credentials",
        "http://100.100.100.200/latest/meta-data",
        "http://168.63.129.16/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./",
        "http://[::ffff:169.254.169.254]/",
        "http://2852039166/",
        "http://0xa9fea9fe/",
    ],
)
def test_metadata_is_denied_wherever_the_server_listens(policy: EgressPolicy, url: str) -> None:
    assert _rule(policy, url) == "always-deny cloud-metadata"


@pytest.mark.parametrize("policy", [LOOPBACK_SERVER, EXPOSED_SERVER], ids=["loopback", "exposed"])
@pytest.mark.parametrize("url", ["http://169.254.1.2:8080/", "http://[fe80::1]/"])
def test_link_local_is_denied_wherever_the_server_listens(policy: EgressPolicy, url: str) -> None:
    assert _rule(policy, url) == "always-deny link-local"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:5432/", "http://127.0.0.2:8000/v1", "http://[::1]:8000/",
        "http://0.0.0.0:8000/", "http://localhost:11434/", "http://api.localhost/",
        "http://10.1.2.3/", "http://192.168.0.10:8000/", "http://[fd00::2]/",
        "http://[::ffff:127.0.0.1]:5432/", "http://2130706433:5432/",
    ],
)  # fmt: skip
def test_loopback_and_private_follow_the_listen_address(url: str) -> None:
    assert _rule(LOOPBACK_SERVER, url) is None  # a local model server: the common case
    assert _rule(EXPOSED_SERVER, url) == "loopback and private denied off loopback"


@pytest.mark.parametrize(
    ("listen", "private"),
    [
        ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
        ("0.0.0.0", False), ("::", False), ("192.0.2.2", False), ("10.0.0.5", False),
        ("evalsi.example", False), ("", False),
    ],
)  # fmt: skip
def test_what_counts_as_listening_on_loopback(listen: str, private: bool) -> None:
    assert EgressPolicy(listen_host=listen).private_allowed is private


def test_allow_private_overrides_the_listen_address() -> None:
    assert EgressPolicy(allow_private=True, listen_host="0.0.0.0").private_allowed
    assert not EgressPolicy(allow_private=False, listen_host="127.0.0.1").private_allowed
    opened = EgressPolicy(allow_private=True, listen_host="0.0.0.0")
    assert _rule(opened, "http://127.0.0.1:5432/") is None
    assert _rule(opened, "http://169.254.169.254/") == "always-deny cloud-metadata"  # still


def test_public_addresses_and_unresolved_names_pass_the_static_check() -> None:
    for url in ("http://8.8.8.8/", "https://api.openai.com/v1", "http://judge.internal:8000/"):
        assert _rule(EXPOSED_SERVER, url) is None


# -- allow and deny entries ----------------------------------------------------------------------
def test_an_allow_entry_opens_one_address_and_port() -> None:
    policy = EgressPolicy.from_lists(allow=["127.0.0.1:8000"], listen_host="0.0.0.0")
    assert _rule(policy, "http://127.0.0.1:8000/v1") is None
    assert _rule(policy, "http://127.0.0.1:5432/") == "loopback and private denied off loopback"
    assert _rule(policy, "http://127.0.0.2:8000/") == "loopback and private denied off loopback"


def test_allow_ranges_ipv6_and_mapped_addresses() -> None:
    policy = EgressPolicy.from_lists(
        allow=["10.0.0.0/8", "[fd00::/8]:443", "::1"], listen_host="0.0.0.0"
    )
    assert _rule(policy, "http://10.9.8.7:1234/") is None
    assert _rule(policy, "http://[::ffff:10.9.8.7]/") is None  # mapped: judged as 10.9.8.7
    assert _rule(policy, "https://[fd00::2]/") is None
    assert _rule(policy, "http://[fd00::2]:80/") is not None  # the entry names port 443
    assert _rule(policy, "http://[::1]:9/") is None


def test_deny_beats_allow_and_the_loopback_default() -> None:
    policy = EgressPolicy.from_lists(
        allow=["10.0.0.0/8", "127.0.0.1"], deny=["10.0.0.5", "*:5432"], listen_host="127.0.0.1"
    )
    assert _rule(policy, "http://10.0.0.5/") == "egress.deny[0]"
    assert _rule(policy, "http://10.0.0.6/") is None
    assert (
        _rule(policy, "http://127.0.0.1:5432/") == "egress.deny[1]"
    )  # allowed address, denied port
    assert _rule(policy, "http://8.8.8.8:5432/") == "egress.deny[1]"  # even a public one
    assert _rule(policy, "http://db.example:5432/") == "egress.deny[1]"  # and before resolving


def test_deny_by_name_and_by_subdomain() -> None:
    policy = EgressPolicy.from_lists(deny=["*.corp.example", "vault.internal"], listen_host="x")
    assert _rule(policy, "http://a.corp.example/") == "egress.deny[0]"
    assert _rule(policy, "http://b.a.CORP.example./") == "egress.deny[0]"
    assert _rule(policy, "http://corp.example/") is None  # *. names subdomains only
    assert _rule(policy, "http://evilcorp.example/") is None
    assert _rule(policy, "http://vault.internal:8200/") == "egress.deny[1]"


def test_metadata_opens_only_to_an_entry_naming_that_address() -> None:
    for broad in (["0.0.0.0/0"], ["169.254.0.0/16"], ["169.254.169.0/24"], ["metadata"]):
        policy = EgressPolicy.from_lists(allow=broad, listen_host="127.0.0.1")
        assert _rule(policy, "http://169.254.169.254/") == "always-deny cloud-metadata", broad
    for exact in (["169.254.169.254"], ["169.254.169.254/32"], ["169.254.169.254:80"]):
        policy = EgressPolicy.from_lists(allow=exact, listen_host="127.0.0.1")
        assert _rule(policy, "http://169.254.169.254/") is None, exact
        assert _rule(policy, "http://metadata.google.internal/") is None  # the same address
        assert _rule(policy, "http://169.254.170.2/") == "always-deny cloud-metadata"
    ported = EgressPolicy.from_lists(allow=["169.254.169.254:80"], listen_host="127.0.0.1")
    assert _rule(ported, "http://169.254.169.254:8080/") == "always-deny cloud-metadata"
    v6 = EgressPolicy.from_lists(allow=["fd00:ec2::254"], listen_host="127.0.0.1")
    assert _rule(v6, "http://[fd00:ec2::254]/") is None


def test_an_explicit_deny_beats_even_an_exact_metadata_allow() -> None:
    policy = EgressPolicy.from_lists(
        allow=["169.254.169.254"], deny=["169.254.0.0/16"], listen_host="127.0.0.1"
    )
    assert _rule(policy, "http://169.254.169.254/") == "egress.deny[0]"


def test_link_local_opens_to_a_range_inside_link_local_only() -> None:
    for broad in (["0.0.0.0/0"], ["::/0"], ["169.0.0.0/8"], ["printer.local"]):
        policy = EgressPolicy.from_lists(allow=broad, listen_host="127.0.0.1")
        assert _rule(policy, "http://169.254.7.7/") == "always-deny link-local", broad
    policy = EgressPolicy.from_lists(allow=["169.254.0.0/16", "fe80::/64"], listen_host="x")
    assert _rule(policy, "http://169.254.7.7/") is None
    assert _rule(policy, "http://[fe80::7]/") is None
    assert _rule(policy, "http://169.254.169.254/") == "always-deny cloud-metadata"


def test_a_name_allow_opens_the_addresses_it_resolves_to_except_metadata_and_link_local() -> None:
    policy = EgressPolicy.from_lists(allow=["judge.internal:8000"], listen_host="0.0.0.0")
    assert policy.decide("judge.internal", ip("10.0.0.5"), 8000) is None
    assert policy.decide("JUDGE.internal.", ip("127.0.0.1"), 8000) is None
    assert policy.decide("judge.internal", ip("10.0.0.5"), 9000) is not None
    assert policy.decide("other.internal", ip("10.0.0.5"), 8000) is not None
    denied = policy.decide("judge.internal", ip("169.254.169.254"), 8000)
    assert denied is not None
    assert denied.rule == "always-deny cloud-metadata"


# -- messages ------------------------------------------------------------------------------------
def test_a_refusal_names_the_host_the_address_the_rule_and_the_fix() -> None:
    with pytest.raises(EgressDenied) as e:
        EXPOSED_SERVER.check_url("http://localhost:5432/db", where="spec.target.http.url")
    message = str(e.value)
    assert message.startswith("spec.target.http.url: egress denied: localhost (127.0.0.1) port")
    assert "rule: loopback and private denied off loopback" in message
    assert "the server listens on 0.0.0.0" in message
    assert "egress.allow: ['127.0.0.1:5432']" in message
    assert "egress.allowPrivate: true" in message
    assert isinstance(e.value, UserError)  # a 400 on the server, exit 2 on the CLI
    assert (e.value.host, e.value.address, e.value.port) == ("localhost", "127.0.0.1", 5432)

    with pytest.raises(EgressDenied) as e:
        LOOPBACK_SERVER.check_url("http://[::ffff:169.254.169.254]/")
    assert "::ffff:169.254.169.254 (169.254.169.254) port 80 is a cloud metadata" in str(e.value)
    assert "egress.allow: ['169.254.169.254']" in str(e.value)

    with pytest.raises(EgressDenied) as e:
        LOOPBACK_SERVER.check_url("http://[fe80::1]:8080/")
    assert "allow it with egress.allow: ['fe80::1/128']" in str(e.value)

    policy = EgressPolicy.from_lists(deny=["*:6379"])
    with pytest.raises(EgressDenied) as e:
        policy.check_url("http://cache:6379/")
    assert "cache port 6379 matches egress.deny[0] '*:6379'" in str(e.value)
    assert "remove '*:6379' from egress.deny" in str(e.value)


def test_the_static_check_leaves_templated_and_hostless_urls_to_connect_time() -> None:
    for url in ("http://{{input}}/x", "", "not a url", "http:///path", "http://127.0.0.1:99999/"):
        EXPOSED_SERVER.check_url(url)  # nothing to judge as written


def test_default_ports() -> None:
    policy = EgressPolicy.from_lists(allow=["10.0.0.1:443"], listen_host="0.0.0.0")
    assert _rule(policy, "https://10.0.0.1/") is None
    assert _rule(policy, "http://10.0.0.1/") is not None  # port 80


# -- entries -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "network", "host", "port"),
    [
        ("10.0.0.5", "10.0.0.5/32", None, None),
        ("10.0.0.0/8", "10.0.0.0/8", None, None),
        ("10.0.0.0/8:5432", "10.0.0.0/8", None, 5432),
        ("::1", "::1/128", None, None),
        ("[::1]:8000", "::1/128", None, 8000),
        ("[fd00::/8]:443", "fd00::/8", None, 443),
        ("fd00::/8", "fd00::/8", None, None),
        ("Judge.Internal:8000", None, "judge.internal", 8000),
        ("*.corp.example", None, "*.corp.example", None),
        ("*:5432", None, None, 5432),
        ("  localhost  ", None, "localhost", None),
    ],
)
def test_entry_forms(text: str, network: str | None, host: str | None, port: int | None) -> None:
    rule = EgressRule.parse(text, "egress.allow[0]")
    assert (str(rule.network) if rule.network else None, rule.host, rule.port) == (
        network,
        host,
        port,
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("*", "needs a port"),
        ("10.0.0.0/33", "not a CIDR range"),
        ("10.0.0.1/8", "has host bits set"),
        ("host:0", "port 1-65535"),
        ("host:70000", "port 1-65535"),
        ("host:http", "port 1-65535"),
        ("[::1", "unclosed"),
        ("[::1]8000", "expected :port"),
        ("2852039166", "not an address"),
        ("bad_host!", "not an address"),
        ("-leading.example", "not an address"),
        ("a..b", "not an address"),
        ("http://10.0.0.1/", "is a URL; give its host"),
    ],
)
def test_bad_entries_say_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        EgressRule.parse(text, "egress.allow[0]")


def test_from_lists_names_the_bad_entry() -> None:
    with pytest.raises(ValueError, match=r"egress\.deny\[1\]: '10\.0\.0\.0/33'"):
        EgressPolicy.from_lists(deny=["*:22", "10.0.0.0/33"])


def test_no_entries_and_duplicates() -> None:
    assert EgressPolicy.from_lists(allow=[], deny=[]) == EgressPolicy()
    twice = EgressPolicy.from_lists(allow=["10.0.0.1", "10.0.0.1"], listen_host="0.0.0.0")
    assert _rule(twice, "http://10.0.0.1/") is None


def test_many_entries() -> None:
    entries = [f"10.{i // 256}.{i % 256}.0/24" for i in range(5000)]
    policy = EgressPolicy.from_lists(allow=entries, listen_host="0.0.0.0")
    assert _rule(policy, "http://10.19.135.9/") is None  # entry 4999
    assert _rule(policy, "http://10.20.0.1/") is not None


def test_trusted_rule_is_exactly_the_endpoint() -> None:
    rule = trusted_rule("http://127.0.0.1:8000/v1", "evalsi.yaml judges.default")
    assert rule is not None
    assert (str(rule.network), rule.port) == ("127.0.0.1/32", 8000)
    named = trusted_rule("https://Judge.Internal/v1", "evalsi.yaml judges.j")
    assert named is not None
    assert (named.host, named.port) == ("judge.internal", 443)
    assert trusted_rule("no-host", "x") is None
    served = EgressPolicy().serving("0.0.0.0", trusted=[rule])
    assert _rule(served, "http://127.0.0.1:8000/v1") is None
    assert _rule(served, "http://127.0.0.1:8001/v1") is not None


def test_policies_are_values() -> None:
    # Sessions are kept per policy: equal policies must hash equal.
    a = EgressPolicy.from_lists(allow=["10.0.0.0/8"], listen_host="0.0.0.0")
    b = EgressPolicy.from_lists(allow=["10.0.0.0/8"], listen_host="0.0.0.0")
    assert a == b
    assert hash(a) == hash(b)
    assert a != a.serving("127.0.0.1")
