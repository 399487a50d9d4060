"""ml-monitoring data quality on real data: missing-rate, type-violations, out-of-range.

Golden vectors: scikit-learn's wine data (178 rows, 13 measurements) with faults put in at
fixed places: values removed, nulled or blanked, numbers typed as text, a flag as a boolean.
References: pandas ``isna`` for missing values, jsonschema's Draft 2020-12 type checker for
JSON types, numpy comparisons for bounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from jsonschema import Draft202012Validator
from sklearn.datasets import load_wine

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError, Score
from evalsi.evaluators import Registry
from evalsi.packs import ml_monitoring

REG = Registry(ml_monitoring.EVALUATORS)
FIELDS = ["alcohol", "malic_acid", "magnesium", "proline", "hue"]
TYPES = {"alcohol": "number", "malic_acid": "number", "magnesium": "integer",
         "proline": "integer", "hue": "number", "cultivar": "string"}  # fmt: skip


def run(data: Any, name: str, **params: Any) -> EvaluationResult:
    r = evalsi.evaluate(
        data=data, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result


def scored(data: Any, name: str, **params: Any) -> dict[str, Score]:
    result = run(data, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: s for s in result.scores}


@pytest.fixture(scope="module")
def wine() -> list[dict[str, Any]]:
    """Wine rows as input objects, with faults at fixed rows."""
    data = load_wine(as_frame=True)
    frame = data.frame
    rows: list[dict[str, Any]] = []
    for rec in frame.to_dict("records"):
        features: dict[str, Any] = {k: float(rec[k]) for k in FIELDS}
        features["cultivar"] = str(data.target_names[int(rec["target"])])
        rows.append(features)
    for i in range(0, 178, 17):
        del rows[i]["hue"]  # absent
    for i in range(3, 178, 23):
        rows[i]["alcohol"] = None  # null
    for i in range(5, 178, 31):
        rows[i]["malic_acid"] = "  "  # blank text
    for i in (7, 40, 90):
        rows[i]["magnesium"] = str(int(rows[i]["magnesium"]))  # an integer typed as text
    rows[11]["proline"] = "n/a"
    rows[12]["proline"] = 1065.5  # not whole
    rows[13]["cultivar"] = 2
    rows[14]["hue"] = True
    rows[15]["alcohol"] = "13.2"
    rows[16]["extra"] = "only here"
    return rows


def as_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": f"w{i}", "input": row} for i, row in enumerate(rows)]


def missing_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{k: (np.nan if v is None else v) for k, v in r.items()} for r in rows])
    blank = frame.apply(lambda col: col.map(lambda v: isinstance(v, str) and not v.strip()))
    return frame.isna() | blank


def test_missing_rate_matches_pandas(wine: list[dict[str, Any]]) -> None:
    got = scored(as_records(wine), "missing-rate")
    expected = missing_frame(wine).mean()
    assert set(expected.index) == {k[13:-1] for k in got if k.startswith("missing-rate[")}
    for field, rate in expected.items():
        assert got[f"missing-rate[{field}]"].number == pytest.approx(rate, abs=1e-12), field
    assert got["missing-rate"].number == pytest.approx(expected.max(), abs=1e-12)
    assert expected.idxmax() in got["missing-rate"].explanation
    detail = got["detail"].structured
    assert detail["records"] == len(wine)
    assert detail["fields"]["hue"]["missing"] == int(missing_frame(wine)["hue"].sum())


def test_missing_rate_of_named_fields(wine: list[dict[str, Any]]) -> None:
    got = scored(as_records(wine), "missing-rate", features=["alcohol", "never_there"])
    assert got["missing-rate[never_there]"].number == 1.0
    assert got["missing-rate"].number == 1.0
    assert got["missing-rate[alcohol]"].number == pytest.approx(
        missing_frame(wine)["alcohol"].mean(), abs=1e-12
    )
    assert "missing-rate[hue]" not in got


def test_type_violations_strict_are_jsonschema_types(wine: list[dict[str, Any]]) -> None:
    got = scored(as_records(wine), "type-violations", types=TYPES)
    checker = Draft202012Validator.TYPE_CHECKER
    missing = missing_frame(wine)
    rates = {}
    for field, expected in TYPES.items():
        values = [r.get(field) for i, r in enumerate(wine) if not missing.loc[i, field]]
        bad = [v for v in values if not checker.is_type(v, expected)]
        rates[field] = len(bad) / len(values)
        assert got[f"type-violations[{field}]"].number == pytest.approx(rates[field]), field
        entry = got["detail"].structured["fields"][field]
        assert (entry["checked"], entry["violations"]) == (len(values), len(bad))
    assert got["type-violations"].number == pytest.approx(max(rates.values()))
    examples = got["detail"].structured["fields"]["magnesium"]["examples"]
    assert examples == [repr(str(int(load_wine().data[i, 4]))) for i in (7, 40, 90)]
    assert got["detail"].structured["fields"]["hue"]["examples"] == ["true"]


def test_type_violations_lax_accepts_text_that_spells_the_type(
    wine: list[dict[str, Any]],
) -> None:
    got = scored(as_records(wine), "type-violations", types=TYPES, strict=False)
    assert got["type-violations[magnesium]"].number == 0.0  # "127" is an integer in text
    assert got["type-violations[alcohol]"].number == 0.0  # "13.2" is a number in text
    proline = [r["proline"] for r in wine]
    assert got["type-violations[proline]"].number == pytest.approx(2 / len(proline))
    assert got["type-violations[hue]"].number > 0  # a JSON true is still not a number
    flags = [{"input": {"ok": v}} for v in ("true", "FALSE", True, "yes", 1)]
    lax = scored(flags, "type-violations", types={"ok": "boolean"}, strict=False)
    assert lax["type-violations"].number == pytest.approx(2 / 5)
    strict = scored(flags, "type-violations", types={"ok": "boolean"})
    assert strict["type-violations"].number == pytest.approx(4 / 5)


BOUNDS = {"alcohol": [12.0, 14.0], "magnesium": [None, 120], "proline": [400, None],
          "hue": [0.5, 1.5]}  # fmt: skip


def test_out_of_range_matches_numpy(wine: list[dict[str, Any]]) -> None:
    got = scored(as_records(wine), "out-of-range", bounds=BOUNDS)
    rates = {}
    for field, (low, high) in BOUNDS.items():
        numbers, other = [], 0
        for r in wine:
            v = r.get(field)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                numbers.append(float(v))
            elif isinstance(v, str) and v.strip():
                try:
                    numbers.append(float(v))
                except ValueError:
                    other += 1
            elif v is not None and not isinstance(v, str):
                other += 1
        x = np.array(numbers)
        out = (x < (-np.inf if low is None else low)) | (x > (np.inf if high is None else high))
        rates[field] = out.mean()
        assert got[f"out-of-range[{field}]"].number == pytest.approx(rates[field]), field
        entry = got["detail"].structured["fields"][field]
        assert (entry["checked"], entry["out_of_range"]) == (x.size, int(out.sum()))
        assert (entry["min"], entry["max"]) == (x.min(), x.max())
        assert entry["non_numeric"] == other
        assert entry["bounds"] == [low, high]
    assert got["out-of-range"].number == pytest.approx(max(rates.values()))
    assert 0 < rates["alcohol"] < 1


def test_csv_cells_are_text(tmp_path: Path) -> None:
    data = load_wine(as_frame=True).frame.head(60)
    lines = ["alcohol,magnesium,hue"]
    for i, rec in enumerate(data.to_dict("records")):
        hue = "" if i % 10 == 0 else repr(rec["hue"])
        mag = "unknown" if i == 3 else str(int(rec["magnesium"]))
        lines.append(f"{rec['alcohol']},{mag},{hue}")
    path = tmp_path / "wine.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    missing = scored(str(path), "missing-rate")
    assert missing["missing-rate[hue]"].number == pytest.approx(6 / 60)
    assert missing["missing-rate"].number == pytest.approx(6 / 60)
    types = {"alcohol": "number", "magnesium": "integer", "hue": "number"}
    lax = scored(str(path), "type-violations", types=types, strict=False)
    assert lax["type-violations[magnesium]"].number == pytest.approx(1 / 60)
    assert lax["type-violations[hue]"].number == 0.0
    strict = scored(str(path), "type-violations", types=types)
    assert strict["type-violations"].number == 1.0  # every CSV cell is text
    out = scored(str(path), "out-of-range", bounds={"metadata.alcohol": [13, None]})
    assert out["out-of-range"].number == pytest.approx(float((data["alcohol"] < 13).mean()))


def test_records_without_fields_make_an_error() -> None:
    result = run([{"input": "plain text"}, {"output": "x"}], "missing-rate")
    assert result.outcome is Outcome.ERROR
    assert "no fields to check" in result.reason


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("type-violations", {"types": {}}, "'types' is empty"),
        ("type-violations", {"types": {"a": "float"}}, "allowed: number, integer"),
        ("out-of-range", {"bounds": {}}, "'bounds' is empty"),
        ("out-of-range", {"bounds": {"a": [1]}}, "expected [low, high]"),
        ("out-of-range", {"bounds": {"a": [None, None]}}, "expected [low, high]"),
        ("out-of-range", {"bounds": {"a": ["0", 1]}}, "expected [low, high]"),
        ("out-of-range", {"bounds": {"a": [True, 1]}}, "expected [low, high]"),
        ("out-of-range", {"bounds": {"a": [5, 1]}}, "low 5 > high 1"),
        ("missing-rate", {"features": [""]}, "blank name"),
    ],
)
def test_bad_params(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message.replace("[", r"\[")):
        run([{"input": {"a": 1}}], name, **params)


def test_params_from_the_command_line_spelling() -> None:
    # the CLI hands objects over as JSON text; validate_params parses them
    ev = REG.resolve("out-of-range")
    bound = ev.bind({"bounds": '{"a": [0, 10]}'})
    assert bound.instance.bounds == {"a": (0.0, 10.0)}
