"""Secrets by reference (``env:NAME`` or ``file:PATH``), never by value in specs, results or logs.

A resolved secret is a ``Secret``: its ``repr`` and ``str`` show the reference, never the value,
and the value is read only through ``reveal()`` at the moment a request is built.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from evalsi.core import UserError

_MASK = "***"


class Secret:
    """A secret value with the reference it came from.

    Example:
        >>> s = Secret("sk-123", ref="env:OPENAI_API_KEY")
        >>> s
        Secret('env:OPENAI_API_KEY')
        >>> s.reveal()
        'sk-123'
    """

    __slots__ = ("_value", "ref")

    def __init__(self, value: str, *, ref: str = "<inline>") -> None:
        self._value = value
        self.ref = ref

    def reveal(self) -> str:
        """The value itself: only for building a request, never for a message or a log."""
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the value masked (for server-echoed messages)."""
        if self._value and self._value in text:
            return text.replace(self._value, _MASK)
        return text

    def __repr__(self) -> str:
        return f"Secret({self.ref!r})"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, spec: str) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(other._value, self._value)

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> str:
        raise TypeError("a Secret cannot be pickled; pass its reference instead")


def resolve_secret(ref: str) -> Secret:
    """Read a secret from its reference: ``env:NAME`` or ``file:PATH``.

    A file's trailing newline is dropped. A missing variable, an unreadable or empty file, or an
    unknown scheme is a ``UserError`` that names the reference (never a value).

    Example:
        >>> resolve_secret("env:PATH")
        Secret('env:PATH')
    """
    scheme, sep, rest = ref.partition(":")
    if not sep or not rest:
        raise UserError(
            f"secret reference {ref!r} is not of the form env:NAME or file:PATH",
            hint="write secretRef: env:OPENAI_API_KEY or secretRef: file:/run/secrets/key",
        )
    if scheme == "env":
        value = os.environ.get(rest)
        if value is None:
            raise UserError(
                f"secret {ref!r}: environment variable {rest} is not set",
                hint=f"export {rest}=... before the run",
            )
    elif scheme == "file":
        path = Path(rest).expanduser()
        try:
            value = path.read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as e:
            raise UserError(
                f"secret {ref!r}: cannot read {path}: {e.strerror or type(e).__name__}"
            ) from e
    else:
        raise UserError(
            f"secret reference {ref!r} has unknown scheme {scheme!r}",
            hint="use env:NAME or file:PATH",
        )
    if not value:
        raise UserError(f"secret {ref!r} is empty")
    return Secret(value, ref=ref)


def as_secret(value: Secret | str | None) -> Secret | None:
    """Accept a ``Secret``, a plain string (wrapped, shown as ``<inline>``) or ``None``."""
    if value is None or isinstance(value, Secret):
        return value
    return Secret(value)
