"""SWE-bench's format and grading without a sandbox: instances read (JSON and JSONL, lists
JSON-encoded or not, malformed ones refused naming the instance), the tests a test patch
selects, both log formats parsed, the resolved rule, and the import's dataset and spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.benchmarks import import_swebench, parse_log, read_instances, resolved
from evalsi.benchmarks._swebench import directives, touched_files
from evalsi.core import UserError
from evalsi.specs import load_run_spec
from tests.support.swebench_fixture import git, make_repo

INSTANCE = {
    "instance_id": "acme__calc-1",
    "repo": "acme/calc",
    "base_commit": "HEAD",
    "problem_statement": "add subtracts",
    "patch": "diff --git a/calc/__init__.py b/calc/__init__.py\n",
    "test_patch": "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a\n+++ b\n"
    "diff --git a/tests/data/x.json b/tests/data/x.json\n",
    "FAIL_TO_PASS": '["tests/test_calc.py::test_add"]',
    "PASS_TO_PASS": "[]",
    "version": 1.2,
}


def _write(path: Path, rows: list[object], *, jsonl: bool = True) -> Path:
    if jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text(json.dumps(rows))
    return path


@pytest.mark.parametrize("jsonl", [True, False])
def test_instances_read_from_json_or_jsonl(tmp_path: Path, jsonl: bool) -> None:
    listed = {**INSTANCE, "instance_id": "b", "FAIL_TO_PASS": ["t1"], "PASS_TO_PASS": None}
    rows = read_instances(_write(tmp_path / "i", [INSTANCE, listed], jsonl=jsonl))
    assert [r["FAIL_TO_PASS"] for r in rows] == [["tests/test_calc.py::test_add"], ["t1"]]
    assert [r["PASS_TO_PASS"] for r in rows] == [[], []]


def test_an_empty_file_has_no_instances(tmp_path: Path) -> None:
    assert read_instances(_write(tmp_path / "i", [])) == []
    assert read_instances(_write(tmp_path / "j", [], jsonl=False)) == []


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {k: v for k, v in INSTANCE.items() if k != "base_commit"},
            "instance 1: missing base_commit",
        ),
        ({**INSTANCE, "repo": ""}, "instance 1: missing repo"),
        (
            {**INSTANCE, "FAIL_TO_PASS": "not json"},
            r"acme__calc-1\): FAIL_TO_PASS: expected a JSON list",
        ),
        ({**INSTANCE, "PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS: expected a list of test names"),
        ("text", "instance 1: expected an object, got str"),
    ],
)
def test_malformed_instances_are_refused_by_name(tmp_path: Path, row: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_instances(_write(tmp_path / "i", [row]))


def test_a_file_that_is_not_json_or_repeats_an_id_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad").write_text('{"instance_id": \n')
    with pytest.raises(UserError, match="not SWE-bench JSON or JSONL"):
        read_instances(tmp_path / "bad")
    with pytest.raises(UserError, match="appears twice"):
        read_instances(_write(tmp_path / "twice", [INSTANCE, INSTANCE]))
    with pytest.raises(UserError, match="cannot read"):
        read_instances(tmp_path / "missing")


def test_the_tests_that_run_are_the_test_patchs_python_files() -> None:
    files = touched_files(str(INSTANCE["test_patch"]) * 2)
    assert files == ["tests/test_calc.py", "tests/data/x.json"]
    assert directives(files, "pytest") == ["tests/test_calc.py"]
    assert directives(files, "unittest") == ["tests.test_calc"]
    assert touched_files("") == []


def test_pytest_and_unittest_logs_parse() -> None:
    pytest_log = (
        "tests/a.py::test_x PASSED\n"
        "=== short test summary info ===\n"
        "PASSED tests/a.py::test_x\n"
        "FAILED tests/a.py::test_y - AssertionError: boom\n"
        "ERROR tests/a.py::test_z\n"
        "XFAIL tests/a.py::test_w\n"
    )
    assert parse_log(pytest_log, "pytest") == {
        "tests/a.py::test_x": "PASSED",
        "tests/a.py::test_y": "FAILED",
        "tests/a.py::test_z": "ERROR",
        "tests/a.py::test_w": "XFAIL",
    }
    unittest_log = (
        "test_a (m.C.test_a) ... ok\n"
        "test_b (m.C.test_b) ... FAIL\n"
        "test_c (m.C.test_c) ... skipped 'no'\n"
        "  indented ... ok\n"
        "FAIL: test_b (m.C.test_b)\n"
    )
    assert parse_log(unittest_log, "unittest") == {
        "test_a (m.C.test_a)": "ok",
        "test_b (m.C.test_b)": "FAIL",
        "test_c (m.C.test_c)": "skipped 'no'",
    }
    assert parse_log("", "pytest") == {}
    assert parse_log("garbage\n" * 3, "unittest") == {}


def test_resolved_needs_every_listed_test_to_pass() -> None:
    statuses = {"a": "PASSED", "b": "XFAIL", "c": "FAILED", "d": "ok"}
    assert resolved(statuses, ["a"], ["b", "d"]) == (
        True,
        "FAIL_TO_PASS 1/1 passed, PASS_TO_PASS 2/2 passed",
    )
    ok, detail = resolved(statuses, ["a", "c"], ["missing"])
    assert not ok
    assert detail.endswith("not passing: c, missing")
    assert resolved({}, [], []) == (True, "FAIL_TO_PASS 0/0 passed, PASS_TO_PASS 0/0 passed")
    many = [f"t{i}" for i in range(8)]
    assert resolved({}, many, [])[1].endswith("t4 and 3 more")


def test_the_import_writes_a_dataset_and_a_spec_that_loads(tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    base = make_repo(repo)
    src = _write(tmp_path / "i.jsonl", [{**INSTANCE, "base_commit": base}])
    result = import_swebench(src, tmp_path / "out", {"acme/calc": repo}, gold=True)
    assert result.count == 1
    (row,) = [json.loads(line) for line in result.dataset.read_text().splitlines()]
    assert row["input"] == "add subtracts"
    assert row["metadata"]["repository"] == {"path": str(repo.resolve()), "commit": base}
    meta = row["metadata"]["swebench"]
    assert meta["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert meta["version"] == "1.2"
    assert row["metadata"]["fixtures"]["files"][".evalsi/gold.patch"] == INSTANCE["patch"]
    spec = load_run_spec(result.spec)
    assert spec.target.agent is not None
    assert spec.target.agent.cli is not None
    assert spec.target.agent.cli.command == (
        "git",
        "apply",
        "--whitespace=nowarn",
        ".evalsi/gold.patch",
    )
    assert [c.function for c in spec.environment.checkers] == ["evalsi.benchmarks:swebench_check"]  # type: ignore[union-attr]
    plain = import_swebench(
        src, tmp_path / "plain", {"acme/calc": repo}, agent_command=["my-agent", "--go"]
    )
    (row,) = [json.loads(line) for line in plain.dataset.read_text().splitlines()]
    assert "fixtures" not in row["metadata"]  # the gold patch is never shown to an agent
    assert load_run_spec(plain.spec).target.agent.cli.command == ("my-agent", "--go")  # type: ignore[union-attr]


def test_the_import_names_a_missing_clone_or_commit(tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    make_repo(repo)
    src = _write(tmp_path / "i.jsonl", [{**INSTANCE, "base_commit": "f" * 40}])
    with pytest.raises(UserError, match="no local clone of acme/calc") as e:
        import_swebench(src, tmp_path / "o", {})
    assert e.value.hint == "map it: --repo acme/calc=PATH"
    with pytest.raises(
        UserError, match=r"acme__calc-1: repository acme/calc\.commit: 'f{40}' names"
    ):
        import_swebench(src, tmp_path / "o", {"acme/calc": repo})
    with pytest.raises(UserError, match="log format"):
        import_swebench(src, tmp_path / "o", {"acme/calc": repo}, log_format="tap")  # type: ignore[arg-type]
    assert git(repo, "status", "--porcelain") == ""
