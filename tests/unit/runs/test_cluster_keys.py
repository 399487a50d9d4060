"""A cluster key the records do not carry: an error when none has it (with a "did you mean"),
a warning naming how many lack it when some do; the interval of a clean key is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalsi
from evalsi.core import UserError


def rows(topics: list[str | None]) -> list[dict[str, object]]:
    return [
        {
            "id": str(i),
            "output": "a" if i % 2 else "b",
            "reference": "a",
            "metadata": {"difficulty": "easy"} | ({"topic": t} if t is not None else {}),
        }
        for i, t in enumerate(topics)
    ]


def test_no_record_has_the_key(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        evalsi.evaluate(
            rows(["x", "y", "x"]),
            ["exact-match"],
            cluster_by="topc",
            store=tmp_path / "s.db",
        )
    message = str(caught.value)
    assert "'topc'" in message
    assert "'difficulty', 'topic'" in message
    assert caught.value.hint == "did you mean 'topic'?"


def test_no_metadata_at_all_says_so(tmp_path: Path) -> None:
    data = [{"id": "1", "output": "a", "reference": "a"}]
    with pytest.raises(UserError, match=r"metadata keys: none"):
        evalsi.evaluate(data, ["exact-match"], cluster_by="topic", store=tmp_path / "s.db")


def test_some_records_lack_the_key(tmp_path: Path) -> None:
    result = evalsi.evaluate(
        rows(["x", None, "x", None, "y"]),
        ["exact-match"],
        cluster_by="topic",
        store=tmp_path / "s.db",
    )
    (warning,) = [w for w in result.warnings if w["kind"] == "cluster_key_missing"]
    assert warning["count"] == 2
    assert "2 of 5 record(s) have no metadata 'topic'" in warning["message"]
    # the lacking records are their own clusters: x, y and two singletons
    assert result.metrics[0].clusters == 4


def test_every_record_has_the_key_no_warning(tmp_path: Path) -> None:
    result = evalsi.evaluate(
        rows(["x", "y", "x"]), ["exact-match"], cluster_by="topic", store=tmp_path / "s.db"
    )
    assert result.warnings == []
    assert result.metrics[0].ci.method == "cluster-wilson"
