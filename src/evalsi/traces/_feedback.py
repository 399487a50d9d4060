"""Late signals sent as span events, and the checks feedback from the API goes through.

An app that has no side channel can record feedback on any span of the trace it is about:
an event named ``evalsi.feedback`` (or ``feedback``) with attributes ``feedback.value``
(a number; +1 / -1 for thumbs up / down, or the strings ``up`` / ``down``), ``feedback.label``,
``feedback.name`` and ``feedback.comment``. It joins the span's trace like feedback posted to
the API does.
"""

from __future__ import annotations

import math
import re
from typing import Any

from evalsi.core import Feedback, Span, UserError

EVENT_NAMES = frozenset({"evalsi.feedback", "feedback"})
_THUMBS = {"up": 1.0, "down": -1.0, "+1": 1.0, "-1": -1.0, "positive": 1.0, "negative": -1.0}
MAX_TEXT = 4096
MAX_NAME = 256  # the store's column


def feedback_from_events(span: Span) -> list[Feedback]:
    """The feedback events on ``span`` (malformed values are ignored, not raised)."""
    found = []
    for event in span.events:
        if event.name not in EVENT_NAMES:
            continue
        attrs = event.attributes
        value = _value(attrs.get("feedback.value"))
        label = _text(attrs.get("feedback.label"))
        if value is None and not label:
            continue
        found.append(
            Feedback(
                trace_id=span.trace_id,
                session_id=_text(attrs.get("feedback.session_id")),
                name=_text(attrs.get("feedback.name"))[:MAX_NAME] or "feedback",
                value=value,
                label=label,
                comment=_text(attrs.get("feedback.comment")),
                source="span_event",
                time_unix_nano=event.time_unix_nano or span.end_time_unix_nano,
            )
        )
    return found


def check_feedback(feedback: Feedback) -> Feedback:
    """Validates feedback posted over the API.

    Raises:
        UserError: naming the field (no trace or session id, a value that is not finite,
            text over 4096 characters).
    """
    if not feedback.trace_id and not feedback.session_id:
        raise UserError("feedback: give trace_id or session_id (what the feedback is about)")
    if feedback.trace_id and not re.fullmatch("[0-9a-f]{32}", feedback.trace_id):
        raise UserError(
            f"feedback.trace_id: expected 32 lower-case hex digits, got {feedback.trace_id!r}"
        )
    if feedback.value is not None and not math.isfinite(feedback.value):
        raise UserError("feedback.value: expected a finite number")
    if feedback.value is None and not feedback.label:
        raise UserError("feedback: give a value (e.g. 1 / -1 for thumbs up / down) or a label")
    if len(feedback.name) > MAX_NAME:
        raise UserError(f"feedback.name: longer than {MAX_NAME} characters")
    for name in ("session_id", "label", "comment"):
        if len(getattr(feedback, name)) > MAX_TEXT:
            raise UserError(f"feedback.{name}: longer than {MAX_TEXT} characters")
    return feedback


def _value(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return 1.0 if raw else -1.0
    if isinstance(raw, int | float):
        return float(raw) if math.isfinite(raw) else None
    if isinstance(raw, str):
        thumbs = _THUMBS.get(raw.strip().lower())
        if thumbs is not None:
            return thumbs
        try:
            number = float(raw)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _text(raw: Any) -> str:
    return raw[:MAX_TEXT] if isinstance(raw, str) else ""
