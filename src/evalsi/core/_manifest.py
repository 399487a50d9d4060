"""Evaluator references and manifests (mirrors ``evaluator.proto``)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core._errors import UnknownEvaluatorError


class Scope(enum.StrEnum):
    """What an evaluator looks at. ``record`` and ``dataset`` run today; the rest are declared."""

    RECORD = "record"
    DATASET = "dataset"
    SPAN = "span"
    SESSION = "session"
    COMPARATIVE = "comparative"


OutputType = Literal["number", "passed", "label", "structured"]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One metric an evaluator emits, with its range and which direction is better."""

    name: str
    type: OutputType
    range: tuple[float, float] | None = None
    higher_is_better: bool | None = True
    description: str = ""


@dataclass(frozen=True, slots=True)
class EvaluatorRef:
    """``namespace/name@version``; namespace and version are optional when written."""

    namespace: str
    name: str
    version: str = ""

    @property
    def qualified(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        base = self.qualified if self.namespace else self.name
        return f"{base}@{self.version}" if self.version else base


_REF = re.compile(
    r"^(?:(?P<ns>[a-z0-9][a-z0-9_.-]*)/)?(?P<name>[a-z0-9][a-z0-9_.-]*)(?:@(?P<ver>[0-9A-Za-z.+-]+))?$"
)


def parse_ref(text: str) -> EvaluatorRef:
    """Parse ``builtin/exact-match@1.0.0``, ``builtin/exact-match`` or ``exact-match``.

    Example:
        >>> parse_ref("builtin/exact-match@1.0.0").version
        '1.0.0'
    """
    match = _REF.match(text.strip())
    if not match:
        raise UnknownEvaluatorError(
            f"invalid evaluator reference {text!r}",
            hint="write NAME, NAMESPACE/NAME or NAMESPACE/NAME@VERSION (lowercase, digits, - _ .)",
        )
    return EvaluatorRef(match["ns"] or "", match["name"], match["ver"] or "")


@dataclass(frozen=True, slots=True)
class EvaluatorManifest:
    """Everything the host needs to know about an evaluator without running it.

    ``requires`` lists record fields (``output``, ``reference``, ``usage.latency_ms``...) that a
    record must hold; a record lacking one is SKIPPED with a reason, never scored.
    """

    ref: EvaluatorRef
    scope: Scope = Scope.RECORD
    requires: tuple[str, ...] = ("output",)
    outputs: tuple[OutputSpec, ...] = ()
    params_schema: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    example: str = ""
    pack: str = ""
    batchable: bool = False

    @property
    def name(self) -> str:
        return self.ref.qualified

    @property
    def version(self) -> str:
        return self.ref.version
