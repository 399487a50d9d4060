"""Egress policy: which addresses a server may call on a caller's behalf.

A server calls whatever URL a run spec or a policy names (targets, judges, webhooks). Without a
rule, a caller could point it at the database on the server's loopback, at another host of its
private network, or at the cloud's metadata service, which hands out credentials. The policy
decides one (host, address, port) at a time, in this order:

1. ``egress.deny`` entries: matched, denied (the operator's deny is the last word).
2. Cloud metadata addresses (``METADATA_ADDRESSES``): denied unless an allow entry names that
   one address (``169.254.169.254`` or ``/32``); a range or a host name does not unlock it.
3. Link-local addresses (169.254.0.0/16, fe80::/10): denied unless an allow entry is an address
   or range inside link-local (``0.0.0.0/0`` does not count).
4. ``egress.allow`` entries: matched, allowed.
5. Loopback (with 0.0.0.0 and ::, which reach this host) and private or reserved addresses:
   allowed while the server listens on loopback (a model server on the same machine is the
   common case), denied once it listens on another address; ``allowPrivate`` overrides.
6. Everything else (public addresses): allowed.

IPv4 written inside IPv6 (``::ffff:169.254.169.254``, NAT64 ``64:ff9b::``, the old compatible
form) is judged as the IPv4 address, and legacy numeric IPv4 (``2852039166``, ``0xa9.254.1``)
as the address the C library would connect to. The decision is pure; ``_egress_aiohttp`` applies
it at connect time to the addresses a name resolved to, so a name pointing inward (``localhost``,
``/etc/hosts``, DNS rebinding) is judged by where the connection goes. ``check_url`` is the
static check a server runs when a spec is submitted, for a clear 400 before anything starts.

The embedded CLI and library use no policy at all.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from evalsi.core import UserError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Category = Literal["metadata", "link-local", "loopback", "private", "public"]

METADATA_ADDRESSES: dict[IPAddress, str] = {
    ipaddress.ip_address(a): who
    for a, who in (
        ("169.254.169.254", "AWS, Azure, GCP, OpenStack, Oracle, DigitalOcean instance metadata"),
        ("fd00:ec2::254", "AWS instance metadata over IPv6"),
        ("169.254.170.2", "AWS ECS task metadata and credentials"),
        ("169.254.170.23", "AWS EKS Pod Identity credentials"),
        ("fd00:ec2::23", "AWS EKS Pod Identity credentials over IPv6"),
        ("100.100.100.200", "Alibaba Cloud instance metadata"),
        ("168.63.129.16", "Azure WireServer"),
        ("169.254.0.23", "Tencent Cloud instance metadata"),
    )
}
"""Addresses that hand out instance credentials; denied unless allowed one by one."""

METADATA_NAMES: dict[str, IPAddress] = {
    name: ipaddress.ip_address(a)
    for name, a in (
        ("metadata.google.internal", "169.254.169.254"),
        ("metadata.goog", "169.254.169.254"),
        ("metadata", "169.254.169.254"),
        ("instance-data", "169.254.169.254"),
        ("instance-data.ec2.internal", "169.254.169.254"),
        ("metadata.tencentyun.com", "169.254.0.23"),
    )
}
"""Names of the metadata services; judged as their address even before they are resolved."""

_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
_THIS_HOST = (ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("::/128"))
_PRIVATE = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_LEGACY_V4 = re.compile(r"[0-9a-fA-FxX.]+")

_WHAT: dict[Category, str] = {
    "metadata": "a cloud metadata address",
    "link-local": "a link-local address",
    "loopback": "a loopback address",
    "private": "a private or reserved address",
    "public": "a public address",
}


class EgressDenied(UserError):
    """A call the egress policy refuses. ``rule`` names the rule that decided it.

    Attributes:
        rule: ``egress.deny[i]``, ``always-deny cloud-metadata``, ``always-deny link-local`` or
            ``loopback and private denied off loopback``.
        host: the host as the URL names it; ``address`` and ``port`` where it would connect.
    """

    def __init__(
        self, message: str, *, rule: str, host: str, address: str, port: int, hint: str | None
    ) -> None:
        super().__init__(message, hint=hint)
        self.rule = rule
        self.host = host
        self.address = address
        self.port = port

    def at(self, where: str) -> EgressDenied:
        """The same refusal with ``where`` (a field path) in front of the message."""
        return EgressDenied(
            f"{where}: {self.message}",
            rule=self.rule,
            host=self.host,
            address=self.address,
            port=self.port,
            hint=self.hint,
        )


def unwrap(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, compatible), else ``address``.

    Example:
        >>> unwrap(ipaddress.ip_address("::ffff:169.254.169.254"))
        IPv4Address('169.254.169.254')
    """
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.scope_id:
        address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if 1 < int(address) < 2**32:  # ::a.b.c.d, deprecated, never routed: judged as IPv4 anyway
        return ipaddress.IPv4Address(int(address))
    return address


def classify(address: IPAddress) -> Category:
    """What kind of address ``address`` is, once unwrapped (metadata before link-local)."""
    address = unwrap(address)
    if address in METADATA_ADDRESSES:
        return "metadata"
    if any(address in net for net in _LINK_LOCAL):
        return "link-local"
    if address.is_loopback or any(address in net for net in _THIS_HOST):
        return "loopback"
    if any(address in net for net in _PRIVATE) or not address.is_global or address.is_multicast:
        return "private"
    return "public"


def literal_address(host: str) -> IPAddress | None:
    """``host`` as the address a connection to it would reach, or None for a name.

    Accepts IPv6 with or without brackets and the legacy IPv4 forms the C library accepts
    (``2852039166``, ``0251.0376.0251.0376``, ``0xa9fea9fe``, ``127.1``).
    """
    text = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if text and _LEGACY_V4.fullmatch(text) and text[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _normal_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


@dataclass(frozen=True, slots=True)
class EgressRule:
    """One ``egress.allow`` or ``egress.deny`` entry.

    Forms: an address (``10.0.0.5``, ``::1``), a range (``10.0.0.0/8``, ``fd00::/8``), a host
    name (``judge.internal``, ``*.corp.example`` for its subdomains), each with an optional
    ``:port`` (IPv6 in brackets: ``[::1]:8000``, ``[fd00::/8]:443``), or ``*:PORT`` for a port
    on any host.

    Example:
        >>> EgressRule.parse("10.0.0.0/8:5432", "egress.deny[0]").port
        5432
    """

    text: str
    source: str
    network: IPNetwork | None = None
    host: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str, source: str) -> EgressRule:
        """Raise ``ValueError`` saying what is wrong with ``text``."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("expected an address, a CIDR range or a host name, got an empty value")
        raw = text.strip()
        if "://" in raw:
            raise ValueError(
                f"{raw!r} is a URL; give its host (and :port), e.g. judge.internal:8000"
            )
        target, port = _split_port(raw)
        if target == "*":
            if port is None:
                raise ValueError(f"{raw!r}: '*' needs a port (*:5432)")
            return cls(raw, source, port=port)
        if "/" in target:
            try:
                network = ipaddress.ip_network(target, strict=True)
            except ValueError as e:
                raise ValueError(f"{raw!r} is not a CIDR range ({e})") from None
            return cls(raw, source, network=network, port=port)
        try:
            address = ipaddress.ip_address(target)
        except ValueError:
            pass
        else:
            return cls(raw, source, network=ipaddress.ip_network(address), port=port)
        name = _normal_host(target)
        labels = name.removeprefix("*.").split(".")
        if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
            raise ValueError(
                f"{raw!r} is not an address, a CIDR range or a host name (with an optional "
                ":port, IPv6 in brackets: [::1]:8000)"
            )
        return cls(raw, source, host=name, port=port)

    def matches(self, host: str | None, address: IPAddress | None, port: int) -> bool:
        """Whether a call to ``host`` at ``address`` and ``port`` is what this entry names."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            if address is None:
                return False
            return unwrap(address) in self.network or address in self.network
        if self.host is not None:
            if host is None:
                return False
            name = _normal_host(host)
            if self.host.startswith("*."):
                return name.endswith(self.host[1:])
            return name == self.host
        return True  # *:PORT

    def unlocks(self, address: IPAddress, category: Category, port: int) -> bool:
        """Whether this allow entry is specific enough for a metadata or link-local address:
        that one address for metadata, a range inside link-local for link-local."""
        if self.network is None or not self.matches(None, address, port):
            return False
        if category == "metadata":
            return self.network.num_addresses == 1
        return any(
            self.network.version == net.version and self.network.subnet_of(net)  # type: ignore[arg-type]
            for net in _LINK_LOCAL
        )


def _split_port(raw: str) -> tuple[str, int | None]:
    """``[v6]:port``, ``v4-or-name[/len]:port``, or no port (a bare IPv6 has several colons)."""
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{raw!r}: unclosed '['")
        rest = raw[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{raw!r}: expected :port after ']'")
        return raw[1:end], _port(raw, rest[1:]) if rest else None
    if raw.count(":") == 1:
        target, _, port = raw.partition(":")
        return target, _port(raw, port)
    return raw, None


def _port(raw: str, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{raw!r}: expected a port 1-65535 after ':'")
    return int(text)


def parse_rules(entries: Iterable[str], source: str) -> tuple[EgressRule, ...]:
    """Parse a list of entries; ``ValueError`` names the first bad one as ``source[i]``."""
    rules = []
    for i, text in enumerate(entries):
        try:
            rules.append(EgressRule.parse(text, f"{source}[{i}]"))
        except ValueError as e:
            raise ValueError(f"{source}[{i}]: {e}") from None
    return tuple(rules)


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (a listen address)."""
    if _normal_host(host) == "localhost":
        return True
    address = literal_address(host)
    return address is not None and unwrap(address).is_loopback


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """The rules of a server's outbound calls (see the module docstring for their order).

    ``allow_private`` None follows ``listen_host``: loopback and private addresses are allowed
    only while the server listens on loopback. An empty ``listen_host`` counts as exposed (the
    strict default). Frozen and hashable: sessions are kept per policy.

    Example:
        >>> db = ipaddress.ip_address("127.0.0.1")
        >>> EgressPolicy(listen_host="0.0.0.0").decide("localhost", db, 5432).rule
        'loopback and private denied off loopback'
        >>> EgressPolicy(listen_host="127.0.0.1").decide("localhost", db, 5432) is None
        True
    """

    allow: tuple[EgressRule, ...] = ()
    deny: tuple[EgressRule, ...] = ()
    allow_private: bool | None = None
    listen_host: str = ""

    @classmethod
    def from_lists(
        cls,
        *,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        allow_private: bool | None = None,
        listen_host: str = "",
    ) -> EgressPolicy:
        """A policy from entry strings (``ValueError`` names a bad one)."""
        return cls(
            parse_rules(allow, "egress.allow"),
            parse_rules(deny, "egress.deny"),
            allow_private,
            listen_host,
        )

    def serving(self, listen_host: str, *, trusted: Iterable[EgressRule] = ()) -> EgressPolicy:
        """This policy for a server listening on ``listen_host``, with ``trusted`` endpoints
        (the operator's own, from ``evalsi.yaml``) added to the allow list."""
        return replace(self, allow=(*self.allow, *trusted), listen_host=listen_host)

    @property
    def private_allowed(self) -> bool:
        if self.allow_private is not None:
            return self.allow_private
        return bool(self.listen_host) and is_loopback_host(self.listen_host)

    def decide(self, host: str | None, address: IPAddress, port: int) -> EgressDenied | None:
        """None when a call to ``host`` resolved to ``address`` on ``port`` is allowed, else
        the refusal (not raised)."""
        category = classify(address)
        for rule in self.deny:
            if rule.matches(host, address, port):
                return self._denied_by(rule, host, address, port)
        if category in ("metadata", "link-local"):
            if any(rule.unlocks(address, category, port) for rule in self.allow):
                return None
            wanted = unwrap(address)
            entry = str(wanted) if category == "metadata" else f"{wanted}/{wanted.max_prefixlen}"
            return self._denied(
                host, address, port, f"is {_WHAT[category]}",
                f"always-deny {'cloud-metadata' if category == 'metadata' else 'link-local'}",
                f"allow it with egress.allow: [{entry!r}] in evalsi.yaml",
            )  # fmt: skip
        if any(rule.matches(host, address, port) for rule in self.allow):
            return None
        if category in ("loopback", "private") and not self.private_allowed:
            listening = self.listen_host or "an unknown address"
            return self._denied(
                host, address, port, f"is {_WHAT[category]}",
                "loopback and private denied off loopback",
                f"the server listens on {listening}; allow it with egress.allow: "
                f"[{_entry(unwrap(address), port)!r}], or every loopback and private address "
                "with egress.allowPrivate: true, in evalsi.yaml",
            )  # fmt: skip
        return None

    def check(self, host: str | None, address: IPAddress, port: int) -> None:
        """Raise ``EgressDenied`` when ``decide`` refuses."""
        denied = self.decide(host, address, port)
        if denied is not None:
            raise denied

    def check_name(self, host: str, port: int) -> None:
        """What can be decided from a name before resolving it: deny entries naming it or
        its port, metadata names (judged as their address) and ``localhost`` (RFC 6761)."""
        name = _normal_host(host)
        known = METADATA_NAMES.get(name)
        if known is None and (name == "localhost" or name.endswith(".localhost")):
            known = ipaddress.IPv4Address("127.0.0.1")
        if known is not None:
            self.check(host, known, port)
            return
        for rule in self.deny:
            if rule.network is None and rule.matches(host, None, port):
                raise self._denied_by(rule, host, None, port)

    def check_url(self, url: str, *, where: str = "") -> None:
        """The static check of a URL a caller names: its literal address, or what its name
        tells before resolving (``check_name``). Names are resolved only at connect time.
        ``where`` (a field path) prefixes the message."""
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        if not host or "{{" in (parts.netloc or ""):
            return  # no host yet (a template fills it): judged at connect time
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return  # the connector reports a bad port itself
        try:
            address = literal_address(host)
            if address is not None:
                self.check(host, address, port)
            else:
                self.check_name(host, port)
        except EgressDenied as e:
            if not where:
                raise
            raise e.at(where) from None

    def _denied_by(
        self, rule: EgressRule, host: str | None, address: IPAddress | None, port: int
    ) -> EgressDenied:
        return self._denied(
            host, address, port, f"matches {rule.source} {rule.text!r}",
            rule.source, f"remove {rule.text!r} from egress.deny in evalsi.yaml",
        )  # fmt: skip

    def _denied(
        self,
        host: str | None,
        address: IPAddress | None,
        port: int,
        what: str,
        rule: str,
        hint: str,
    ) -> EgressDenied:
        name = _normal_host(host) if host else ""
        shown = name or str(address)
        if address is not None and str(unwrap(address)) != shown:
            shown = f"{shown} ({unwrap(address)})"  # where it goes, beside what was named
        message = f"egress denied: {shown} port {port} {what} (rule: {rule}; {hint})"
        return EgressDenied(
            message,
            rule=rule,
            host=name,
            address=str(address) if address is not None else "",
            port=port,
            hint=None,
        )


def _entry(address: IPAddress, port: int) -> str:
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def trusted_rule(url: str, source: str) -> EgressRule | None:
    """An allow entry for exactly the host and port of ``url`` (an endpoint the operator
    configured), or None when ``url`` has no host."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    address = literal_address(parts.hostname)
    if address is not None:
        return EgressRule(url, source, network=ipaddress.ip_network(address), port=port)
    return EgressRule(url, source, host=_normal_host(parts.hostname), port=port)
