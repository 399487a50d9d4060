"""The importers' bad input and boundaries: missing files, malformed YAML/TOML/JSON, no task,
one task, duplicate ids — each a UserError naming the file and the field — and the verifier's
staging, which trusts nothing the agent left in the workspace."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evalsi.benchmarks import import_bfcl, import_terminal_bench, stage_verifier
from evalsi.core import Record, UserError

ROOT = Path(__file__).resolve().parents[3]
TB = ROOT / "examples" / "benchmarks" / "terminal-bench"
HARBOR = ROOT / "examples" / "benchmarks" / "harbor"
BFCL = ROOT / "examples" / "benchmarks" / "bfcl"


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copytree(src, dst)
    return dst


def test_one_task_directory_is_one_row(tmp_path: Path) -> None:
    out = import_terminal_bench(TB / "hello-file", tmp_path / "o")
    row = json.loads(out.dataset.read_text())
    assert out.count == 1
    assert row["id"] == "hello-file"
    assert row["input"].startswith("Create a file named hello.txt")
    assert set(row["metadata"]["verifier"]["files"]) == {
        "tests/runner.py", "tests/test_outputs.py", "run-tests.sh", "verify.sh",
    }  # fmt: skip
    solution = row["metadata"]["known"]["gold"]["steps"][0]["tool_call"]["arguments"]["command"]
    assert "/app/" not in solution[2]
    assert "$EVALSI_WORKSPACE/hello.txt" in solution[2]


def test_harbor_environment_excludes_the_dockerfile(tmp_path: Path) -> None:
    out = import_terminal_bench(HARBOR / "word-count", tmp_path / "o")
    meta = json.loads(out.dataset.read_text())["metadata"]
    assert list(meta["fixtures"]["files"]) == ["poem.txt"]
    assert meta["verifier"]["rewritten"] == ["tests/test.sh"]
    assert meta["agent_timeout_sec"] == 60.0
    assert meta["category"] == "text-processing"


def test_no_task_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no task found"):
        import_terminal_bench(tmp_path, tmp_path / "o")
    with pytest.raises(UserError, match="not a directory"):
        import_terminal_bench(tmp_path / "missing", tmp_path / "o")


def test_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _copy(TB / "hello-file", a)
    _copy(TB / "hello-file", b)
    with pytest.raises(UserError, match=r"'hello-file' appears twice"):
        import_terminal_bench([a, b], tmp_path / "o")


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("task.yaml", "instruction: [unclosed", r"task.yaml:\d+: the task file is not valid YAML"),
        ("task.yaml", "- a list", "task.yaml: the task file must be a mapping"),
        ("task.yaml", "difficulty: easy\n", "task.yaml: the field 'instruction' is missing"),
        ("task.yaml", "instruction: 42\n", "task.yaml: the field 'instruction' must be str"),
        ("task.yaml", "instruction: x\nparser_name: swebench\n", "parser_name 'swebench'"),
        ("task.yaml", "instruction: x\nmax_agent_timeout_sec: -1\n", "'max_agent_timeout_sec'"),
    ],
)
def test_malformed_terminal_bench_tasks(tmp_path: Path, file: str, text: str, message: str) -> None:
    task = _copy(TB / "hello-file", tmp_path)
    (task / file).write_text(text)
    with pytest.raises(UserError, match=message):
        import_terminal_bench(task, tmp_path / "o")


def test_missing_files_are_named(tmp_path: Path) -> None:
    task = _copy(TB / "hello-file", tmp_path)
    shutil.rmtree(task / "tests")
    with pytest.raises(UserError, match="tests: the tests directory is missing"):
        import_terminal_bench(task, tmp_path / "o")
    harbor = _copy(HARBOR / "word-count", tmp_path)
    (harbor / "instruction.md").unlink()
    with pytest.raises(UserError, match=r"instruction.md: the instruction is missing"):
        import_terminal_bench(harbor, tmp_path / "o")
    (harbor / "instruction.md").write_text("x")
    (harbor / "tests" / "test.sh").unlink()
    with pytest.raises(UserError, match=r"test.sh: the verifier's entry point is missing"):
        import_terminal_bench(harbor, tmp_path / "o")


def test_malformed_toml_and_binary_files(tmp_path: Path) -> None:
    harbor = _copy(HARBOR / "json-config", tmp_path)
    (harbor / "task.toml").write_text("[agent\ntimeout_sec = 1")
    with pytest.raises(UserError, match=r"task.toml: the task file is not valid TOML"):
        import_terminal_bench(harbor, tmp_path / "o")
    (harbor / "task.toml").write_text("agent = 3\n")
    with pytest.raises(UserError, match=r"\[agent\] must be a table"):
        import_terminal_bench(harbor, tmp_path / "o")
    (harbor / "task.toml").write_text("")
    (harbor / "environment" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match=r"blob.bin: a binary file"):
        import_terminal_bench(harbor, tmp_path / "o")


def test_stage_verifier_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    os.symlink(outside, workspace / ".evalsi-bench")  # the agent's trap
    sample = Record(id="t", metadata={"verifier": {"files": {"tests/test.sh": "exit 0"}}})
    ok, _ = stage_verifier(workspace, sample)
    assert ok
    assert list(outside.iterdir()) == []
    assert (workspace / ".evalsi-bench" / "tests" / "test.sh").read_text() == "exit 0"
    assert not (workspace / ".evalsi-bench").is_symlink()
    assert stage_verifier(workspace, Record(id="u"))[0] is False


def test_bfcl_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no BFCL question file"):
        import_bfcl(tmp_path, tmp_path / "o")
    with pytest.raises(UserError, match=r"category 'multi_turn_base' is not supported"):
        import_bfcl(BFCL, tmp_path / "o", categories=["multi_turn_base"])
    data = tmp_path / "data"
    shutil.copytree(BFCL, data)
    one = import_bfcl(data / "BFCL_v4_simple_python.json", tmp_path / "o")
    assert one.count == 3
    assert one.spec is None
    (data / "BFCL_v4_parallel.json").write_text('{"id": "parallel_0", "question": [[{')
    with pytest.raises(UserError, match=r"BFCL_v4_parallel.json:1: .*not JSON lines"):
        import_bfcl(data, tmp_path / "o")
    (data / "BFCL_v4_parallel.json").write_text(
        json.dumps(
            {"id": "parallel_9", "question": [[{"role": "user", "content": "x"}]], "function": []}
        )
        + "\n"
    )
    with pytest.raises(UserError, match=r"no answer with id 'parallel_9'"):
        import_bfcl(data, tmp_path / "o")
    (data / "BFCL_v4_parallel.json").write_text(
        json.dumps({"id": "parallel_0", "question": [[{"role": "user", "content": "x"}]]}) + "\n"
    )
    with pytest.raises(UserError, match=r"question 'parallel_0': the field 'function' is missing"):
        import_bfcl(data, tmp_path / "o")
    (data / "BFCL_v4_parallel.json").unlink()
    shutil.copy(data / "BFCL_v4_multiple.json", data / "BFCL_v3_multiple.json")
    shutil.copy(
        data / "possible_answer/BFCL_v4_multiple.json",
        data / "possible_answer/BFCL_v3_multiple.json",
    )
    with pytest.raises(UserError, match=r"'multiple_0' appears twice"):
        import_bfcl(data, tmp_path / "o")
