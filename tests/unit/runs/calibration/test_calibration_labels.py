"""Labels files: what is accepted, and a clear error (file, line, field) for everything else,
raised before the judge is asked anything."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import DatasetError, UserError
from evalsi.runs import calibrate_async
from evalsi.runs.calibration._labels import coerce_labels, read_labels
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM
from tests.unit.runs.calibration.calibration_support import judges_for

GOOD = {"id": "a", "input": "2+2?", "output": "4", "reference": "4"}
NEVER_ASKED = judges_for("http://127.0.0.1:9/v1")  # these errors come before any judge call


def write(tmp_path: Path, *rows: Any) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_single_and_several_raters_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        dict(GOOD, label=4),
        dict(GOOD, id="b", labels={"ann": 3, "bo": None, "cy": 4.5}),
        dict(GOOD, id="c", metadata={"labels": {"bo": 2}}),
    )
    labels = read_labels(str(path))
    assert labels.kind == "number"
    assert labels.raters == ["label", "ann", "cy", "bo"]
    assert [i.ratings for i in labels.items] == [
        {"label": 4.0},
        {"ann": 3.0, "cy": 4.5},  # null: bo did not rate this one
        {"bo": 2.0},
    ]
    assert [i.line for i in labels.items] == [1, 2, 3]
    assert labels.version is not None
    assert labels.version.startswith("sha256:")


BAD: list[tuple[list[dict[str, Any]], str]] = [
    ([GOOD], r"labels.jsonl:1: no human label: the record has neither 'label' nor 'labels'"),
    ([dict(GOOD, label=None)], r":1: field 'label': is null"),
    ([dict(GOOD, label=[1, 2])],
     r":1: field 'label': expected true/false, a string or a number, got a list"),
    ([dict(GOOD, label={"x": 1})], r":1: field 'label': .* got an object"),
    ([dict(GOOD, label="  ")], r":1: field 'label': an empty string is not a label"),
    ([dict(GOOD, labels=[True])], r":1: field 'labels': expected an object of rater name -> value"),
    ([dict(GOOD, labels={"ann": None})], r":1: field 'labels': no rater gave a value"),
    ([dict(GOOD, label=True, labels={"ann": True})], r":1: field 'labels': give either label"),
    ([dict(GOOD, labels={"ann": True}), dict(GOOD, labels={"ann": True, "bo": 3})],
     r":2: field 'labels.bo': a number, but line 1 gave a pass/fail label \(true/false\)"),
    ([dict(GOOD, label="good"), dict(GOOD, label=False)],
     r":2: field 'label': a pass/fail label .* but line 1 gave a category"),
    ([{"input": "q", "label": True}], r":1: field 'output': missing, and the judge evaluator"),
]  # fmt: skip


@pytest.mark.parametrize(("rows", "message"), BAD)
def test_bad_labels_name_the_line_and_field_before_any_judge_call(
    tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    path = write(tmp_path, *rows)
    with StubLLM(default='{"correct": true}') as stub:
        with pytest.raises(DatasetError, match=message) as caught:
            asyncio.run(
                calibrate_async(
                    path,
                    "pairwise",
                    judges=judges_for(stub.openai_url),
                    store=tmp_path / "s.db",
                    registry=BUILTINS,
                )
            )
        assert stub.calls(OPENAI_PATH) == 0
    assert str(path) in str(caught.value)
    assert caught.value.hint  # says what a labels record looks like


def test_a_missing_reference_is_named_for_reference_correctness(tmp_path: Path) -> None:
    path = write(tmp_path, dict(GOOD, label=True), {"input": "q", "output": "a", "label": True})
    with pytest.raises(DatasetError, match=r":2: field 'reference': missing"):
        asyncio.run(
            calibrate_async(
                path,
                "reference-correctness",
                judges=NEVER_ASKED,
                store=":memory:",
                registry=BUILTINS,
            )
        )


def test_non_finite_numbers_and_unreadable_rows(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"output": "a", "label": NaN}\n')
    with pytest.raises(DatasetError, match=r"labels.jsonl:1: (not valid JSON|field 'label')"):
        read_labels(str(path))
    path.write_text('{"output": "a", "label": 1}\nnot json\n')
    with pytest.raises(DatasetError, match=r"labels.jsonl:2: not valid JSON"):
        read_labels(str(path))
    path.write_text("\n")
    with pytest.raises(DatasetError, match="no labelled records"):
        read_labels(str(path))
    with pytest.raises(DatasetError, match=":1: field 'label': expected a finite number, got inf"):
        read_labels([{"output": "a", "label": float("inf")}], fields=None)


def test_labels_that_do_not_fit_the_judges_metric(tmp_path: Path) -> None:
    path = write(tmp_path, dict(GOOD, label=4), dict(GOOD, label=2))
    with pytest.raises(
        UserError, match=r"labels are numbers but reference-correctness gives a pass/fail label"
    ) as e:
        asyncio.run(
            calibrate_async(
                path,
                "reference-correctness",
                judges=NEVER_ASKED,
                store=":memory:",
                registry=BUILTINS,
            )
        )
    assert "--metric" in (e.value.hint or "")
    with pytest.raises(UserError, match="no pass/fail, label or numeric metric named 'nope'"):
        asyncio.run(
            calibrate_async(
                path,
                "pairwise",
                metric="nope",
                judges=NEVER_ASKED,
                store=":memory:",
                registry=BUILTINS,
            )
        )
    with pytest.raises(UserError, match="level 'ordinal' needs numeric labels"):
        asyncio.run(
            calibrate_async(
                path,
                "reference-correctness",
                level="ordinal",
                judges=NEVER_ASKED,
                store=":memory:",
                registry=BUILTINS,
            )
        )


def test_only_judge_evaluators_can_be_calibrated_and_a_judge_is_required(tmp_path: Path) -> None:
    path = write(tmp_path, dict(GOOD, label=True))
    with pytest.raises(UserError, match="exact-match does not ask a judge model"):
        asyncio.run(calibrate_async(path, "exact-match", store=":memory:", registry=BUILTINS))
    with pytest.raises(UserError, match="no default judge"):
        asyncio.run(
            calibrate_async(path, "reference-correctness", store=":memory:", registry=BUILTINS)
        )
    with pytest.raises(UserError, match="give params with an evaluator name"):
        asyncio.run(
            calibrate_async(
                path,
                {"ref": "llm-judge"},
                params={"rubric": "x"},
                store=":memory:",
                registry=BUILTINS,
            )
        )


def test_csv_text_labels_are_read_as_the_judges_kind(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("id,output,reference,label\na,4,4,true\nb,5,4,FALSE\nc,4,4, yes\n")
    labels = read_labels(str(path))
    assert labels.kind == "label"  # every CSV cell is text
    assert coerce_labels(labels, "passed")
    assert [i.ratings["label"] for i in labels.items] == [True, False, True]
    path.write_text("id,output,label\na,x,4\nb,y,2.5\n")
    numbers = read_labels(str(path))
    assert coerce_labels(numbers, "number")
    assert [i.ratings["label"] for i in numbers.items] == [4.0, 2.5]
    assert not coerce_labels(read_labels(str(path)), "passed")  # 4 is not pass/fail
    path.write_text("id,output,label\na,x,true\nb,y,maybe\n")
    assert not coerce_labels(read_labels(str(path)), "passed")
    path.write_text("id,output,label\na,x,4\nb,y,inf\n")
    assert not coerce_labels(read_labels(str(path)), "number")
    ones = read_labels([{"output": "x", "label": 1}, {"output": "y", "label": 0}])
    assert coerce_labels(ones, "passed")
    assert [i.ratings["label"] for i in ones.items] == [True, False]
    assert not coerce_labels(read_labels([{"output": "x", "label": True}]), "number")
