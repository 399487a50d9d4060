"""An evaluator that tried records and scored none: a ``nothing_judged`` warning with its first
error and exit code 2 (the run cannot judge it); one scored record is enough to judge."""

from __future__ import annotations

from pathlib import Path

import evalsi
from evalsi import Record, evaluator


@evaluator(name="t/raises", output="passed")
def raises(record: Record) -> bool:
    raise ValueError(f"cannot read {record.id}")


@evaluator(name="t/picky", output="passed")
def picky(record: Record) -> bool:
    if record.id != "2":
        raise ValueError("not this one")
    return True


DATA = [{"id": str(i), "output": "a", "reference": "a"} for i in range(3)]


def test_every_record_an_error(tmp_path: Path) -> None:
    result = evalsi.evaluate(DATA, [raises, "exact-match"], store=tmp_path / "s.db")
    assert result.exit_code == 2
    assert result.unjudged_evaluators == ["raises"]
    (warning,) = result.warnings
    assert warning["kind"] == "nothing_judged"
    assert warning["evaluator"] == "raises"
    assert warning["count"] == 3
    assert warning["examples"] == ["ValueError: cannot read 0"]
    stored = result.store.get_run(result.run_id)  # type: ignore[union-attr]
    assert stored.summary["warnings"] == result.warnings


def test_one_scored_record_is_enough(tmp_path: Path) -> None:
    result = evalsi.evaluate(DATA, [picky], store=tmp_path / "s.db")
    assert result.exit_code == 0
    assert result.warnings == []
    assert result.metrics[0].n == 1


def test_all_skipped_is_not_an_error(tmp_path: Path) -> None:
    data = [{"id": "1", "output": "a"}]  # exact-match requires a reference: skipped
    result = evalsi.evaluate(data, ["exact-match"], store=tmp_path / "s.db")
    assert result.warnings == []
    assert result.exit_code == 0
