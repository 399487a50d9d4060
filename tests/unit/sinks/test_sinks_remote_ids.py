"""The remote ids Langfuse and LangSmith sinks derive: stable, well-formed for each service, and
distinct wherever the evalsi ids differ — at the boundaries too (empty, unicode, long, parts
that would run together)."""

from __future__ import annotations

import re
import uuid

import pytest

from evalsi.sinks._remote_ids import hex_id, task_run_id, task_trace_id, uuid_id

HEX32 = re.compile(r"^[0-9a-f]{32}$")
EDGE_IDS = ["", "r", "é—記録", "a" * 10_000, "a|b", 'q"uote', "\x00", "𝔘𝔫𝔦"]


@pytest.mark.parametrize("record", EDGE_IDS)
def test_a_task_trace_id_is_a_langfuse_trace_id_and_stable(record: str) -> None:
    first = task_trace_id("run-1", record, 0)
    assert HEX32.match(first)
    assert task_trace_id("run-1", record, 0) == first
    assert task_trace_id("run-1", record, 1) != first
    assert task_trace_id("run-2", record, 0) != first


@pytest.mark.parametrize("record", EDGE_IDS)
def test_a_task_run_id_is_a_version_5_uuid_and_stable(record: str) -> None:
    first = task_run_id("run-1", record, 0)
    assert first.version == 5
    assert task_run_id("run-1", record, 0) == first
    assert uuid.UUID(str(first)) == first
    assert task_run_id("run-1", record, 2) != first


def test_parts_never_run_together() -> None:
    assert hex_id("x", "a", "b") != hex_id("x", "ab", "")
    assert hex_id("x", "a", "b") != hex_id("x", "a|b")
    assert hex_id("x", "1") != hex_id("x", 1)
    assert uuid_id("x", "a", "b") != uuid_id("x", "ab", "")
    assert hex_id("trace", "r") != hex_id("score", "r")  # the purpose separates kinds


def test_all_distinct_over_many_ids() -> None:
    ids = {task_trace_id("run", f"r{i}", t) for i in range(2000) for t in range(3)}
    assert len(ids) == 6000
    spans = {hex_id("span", "run", f"r{i}", chars=16) for i in range(2000)}
    assert len(spans) == 2000
    assert all(len(s) == 16 for s in spans)


def test_derivations_are_pinned() -> None:
    """The ids are a contract with data already sent: changing the rule would duplicate every
    run exported before the change."""
    assert task_trace_id("run-1", "rec-1", 0) == hex_id("langfuse.trace", "run-1", "rec-1", 0)
    assert task_trace_id("run-1", "rec-1", 0) == "46b6eaa54be97c9651d3a726bee43eda"
    assert str(task_run_id("run-1", "rec-1", 0)) == "8e360303-a0ac-57b8-b9ed-9b9f92daee3b"


@pytest.mark.parametrize("chars", [0, 65])
def test_hex_lengths_out_of_range_are_refused(chars: int) -> None:
    with pytest.raises(ValueError, match="1 to 64"):
        hex_id("x", "a", chars=chars)
