"""How the A2A connector reads an agent's events (recorded JSON, as a replay sees them): the
answer, the steps, the stop reason, and hostile or malformed events."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.agents._a2a import MAX_OUTPUT, MAX_TEXT, _Turn
from evalsi.connectors import InfraError


def _read(*events: Any) -> tuple[_Turn, list[Any]]:
    turn = _Turn()
    steps = [s for e in events for s in turn.read(e)]
    return turn, steps


def _status(state: str, text: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"state": f"TASK_STATE_{state}"}
    if text:
        status["message"] = {"role": "ROLE_AGENT", "parts": [{"text": text}]}
    return {"statusUpdate": {"taskId": "t", "contextId": "c", "status": status}}


def test_no_event_is_malformed_not_an_empty_answer() -> None:
    turn, steps = _read()
    assert steps == []
    with pytest.raises(InfraError) as e:
        turn.stop_reason()
    assert e.value.kind == "malformed_response"


def test_artifacts_are_the_answer_chunks_joined_artifacts_on_lines() -> None:
    art = {
        "artifactUpdate": {"artifact": {"artifactId": "a", "name": "x", "parts": [{"text": "ab"}]}}
    }
    more = {
        "artifactUpdate": {
            "append": True,
            "artifact": {"artifactId": "a", "parts": [{"text": "cd"}]},
        }
    }
    other = {"artifactUpdate": {"artifact": {"artifactId": "b", "parts": [{"data": {"k": 1}}]}}}
    turn, steps = _read(art, more, other, _status("COMPLETED"))
    assert turn.answer() == 'abcd\n{"k":1}'
    assert turn.stop_reason() == "final_answer"
    assert [s.output for s in steps][1] == {"artifact": "", "text": "cd", "append": True}


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ("FAILED", "failed"),
        ("REJECTED", "rejected"),
        ("CANCELED", "canceled"),
        ("INPUT_REQUIRED", "input_required"),
        ("AUTH_REQUIRED", "auth_required"),
        ("WORKING", "incomplete"),
    ],
)
def test_the_last_state_is_the_stop_reason(state: str, reason: str) -> None:
    turn, _ = _read(_status("WORKING", "busy"), _status(state, "why"))
    assert turn.stop_reason() == reason
    assert turn.answer() == "why"  # no artifact: the agent's last word


def test_a_message_alone_is_a_finished_answer_and_user_echoes_are_not_steps() -> None:
    echo = {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    said = {"message": {"role": "ROLE_AGENT", "contextId": "c9", "parts": [{"text": "hello"}]}}
    turn, steps = _read(echo, said)
    assert [(s.kind, s.name, s.output) for s in steps] == [("message", "agent", "hello")]
    assert (turn.answer(), turn.stop_reason(), turn.context_id) == ("hello", "final_answer", "c9")


def test_hostile_events_are_bounded_or_refused() -> None:
    huge = "y" * (MAX_OUTPUT + 10)
    art = {"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": huge}]}}}
    turn, steps = _read(art, _status("COMPLETED"))
    assert len(turn.answer()) == MAX_OUTPUT
    assert len(steps[0].output["text"]) < MAX_TEXT + 100
    with pytest.raises(InfraError):
        _read("not an object")
    # unknown keys, parts that are not objects, a file part: read without a crash
    turn, _ = _read(
        {"somethingNew": {}},
        {
            "artifactUpdate": {
                "artifact": {"parts": ["x", {"url": "http://f", "filename": "f.txt"}]}
            }
        },
        _status("COMPLETED"),
    )
    assert turn.answer() == "[file f.txt]"
