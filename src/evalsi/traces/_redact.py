"""Regex redaction applied to spans at ingest, before anything is stored or graded.

A rule replaces every match of its pattern in string values (span and event attributes,
resource attributes, status messages), optionally only under attribute keys matching its
``keys`` globs (an event's attributes also as ``<event name>.<key>``). Rules run in order.
Redaction is the first thing ingest does, so no redacted value reaches the store, a mapper, a
judge or an exporter.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import Pattern, Span, SpanEvent, UserError, compile_pattern

MAX_PATTERN = 1000


@dataclass(frozen=True, slots=True)
class RedactionRule:
    """``pattern`` (compiled by ``compile_pattern``: RE2, linear time) is replaced by
    ``replacement`` (Python's template syntax: ``\\1``, ``\\g<name>``) wherever it matches."""

    name: str
    pattern: Pattern
    replacement: str = "[REDACTED]"
    # Attribute-key globs ("gen_ai.*", "input.value"); empty: every string value.
    keys: tuple[str, ...] = ()

    def applies_to(self, key: str) -> bool:
        return not self.keys or any(fnmatch.fnmatchcase(key, k) for k in self.keys)


def parse_rules(value: Any, where: str = "traces.redaction") -> tuple[RedactionRule, ...]:
    """Rules from config: a list of ``{name?, pattern, replacement?, keys?}``.

    Raises:
        UserError: naming the rule and the field that is wrong (a bad regex included).
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{where}: expected a list of rules, got {type(value).__name__}")
    rules = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise UserError(f"{at}: expected a mapping with 'pattern', got {type(item).__name__}")
        unknown = set(item) - {"name", "pattern", "replacement", "keys"}
        if unknown:
            raise UserError(
                f"{at}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                "expected name, pattern, replacement, keys"
            )
        pattern = item.get("pattern")
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN:
            raise UserError(f"{at}.pattern: expected a regex of 1-{MAX_PATTERN} characters")
        # RE2: the rules run on every span the server receives, so one pattern that
        # backtracks exponentially would stall ingest for everyone.
        compiled = compile_pattern(pattern, where=f"{at}.pattern", max_length=MAX_PATTERN)
        replacement = item.get("replacement", "[REDACTED]")
        if not isinstance(replacement, str):
            raise UserError(f"{at}.replacement: expected a string")
        keys = item.get("keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise UserError(f"{at}.keys: expected a list of attribute-key globs")
        name = item.get("name", f"rule-{i}")
        if not isinstance(name, str):
            raise UserError(f"{at}.name: expected a string")
        rules.append(RedactionRule(name, compiled, replacement, tuple(keys)))
    return tuple(rules)


class Redactor:
    """Applies rules to spans in place. With no rules it costs one attribute check."""

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = tuple(rules)
        self._any = _prefilter(self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def spans(self, spans: Iterable[Span]) -> None:
        if not self.rules:
            return
        seen_resources: set[int] = set()
        for span in spans:
            self._dict(span.attributes)
            for event in span.events:
                self._dict(event.attributes, event.name)
            for link in span.links:
                self._dict(link.attributes)
            if id(span.resource) not in seen_resources:  # shared by the spans of one request
                seen_resources.add(id(span.resource))
                self._dict(span.resource)
            if span.status_message:
                span.status_message = self._text("", span.status_message)

    def events(self, events: Iterable[SpanEvent]) -> None:
        """Span events that came on their own (OTLP log records), their bodies included."""
        if not self.rules:
            return
        for event in events:
            self._dict(event.attributes, event.name)

    def _dict(self, attributes: dict[str, Any], event: str = "") -> None:
        """An event's attributes also answer to ``<event name>.<key>``: a message's content
        (``content``, or a log record's ``event.body``) is ``gen_ai.user.message.…``, so
        ``keys: ['gen_ai.*']`` covers the message events as it covers the attributes."""
        for key, value in attributes.items():
            new = self._value(key, value, f"{event}.{key}" if event else "")
            if new is not value:
                attributes[key] = new

    def _value(self, key: str, value: Any, alias: str = "") -> Any:
        if isinstance(value, str):
            return self._text(key, value, alias)
        if isinstance(value, list):
            items = [self._value(key, v, alias) for v in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, Mapping):
            changed = {
                k: self._value(f"{key}.{k}", v, f"{alias}.{k}" if alias else "")
                for k, v in value.items()
            }
            return changed if any(changed[k] is not value[k] for k in value) else value
        return value

    def _text(self, key: str, text: str, alias: str = "") -> str:
        if self._any is not None and self._any.search(text) is None:
            return text
        for rule in self.rules:
            if rule.applies_to(key) or (alias and rule.applies_to(alias)):
                text = rule.pattern.sub(rule.replacement, text)
        return text


def _prefilter(rules: Sequence[RedactionRule]) -> Pattern | None:
    """One regex matching wherever any rule matches: most values match nothing, and one scan
    is cheaper than one per rule. RE2 scopes inline flags to their group and has no
    backreferences, and the union is compiled without captures (so two rules may name the
    same group): every set of rules combines. None when the union is over RE2's budget."""
    if not rules:
        return None
    union = "|".join(f"(?:{r.pattern.pattern})" for r in rules)
    try:
        return compile_pattern(
            union, where="traces.redaction", max_length=len(union), never_capture=True
        )
    except UserError:
        return None
