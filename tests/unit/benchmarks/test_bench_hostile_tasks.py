"""Hostile Terminal-Bench / Harbor task directories: a task's files are read from inside the
task, never through a link to elsewhere on the host (its text goes to the agent and its model),
never from a FIFO, and a YAML alias bomb in task.yaml is refused instead of expanded."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from evalsi.benchmarks import import_terminal_bench
from evalsi.core import UserError

SECRET = "AKIA-host-secret-never-in-a-dataset"


def _tb_task(root: Path) -> Path:
    task = root / "t1"
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text("instruction: fix it\n")
    (task / "tests" / "test_outputs.py").write_text("def test_ok():\n    assert True\n")
    return task


def _harbor_task(root: Path) -> Path:
    task = root / "h1"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text("[metadata]\ndifficulty = 'easy'\n")
    (task / "instruction.md").write_text("fix it\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return task


@pytest.fixture
def secret_dir(tmp_path: Path) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    (host / "credentials").write_text(SECRET)
    return host


def _imports_refused(src: Path, out: Path) -> str:
    with pytest.raises(UserError) as caught:
        import_terminal_bench(src, out)
    dataset = out / "tasks.jsonl"
    assert not dataset.exists() or SECRET not in dataset.read_text()
    return caught.value.message


def test_a_symlinked_harbor_instruction_is_refused(tmp_path: Path, secret_dir: Path) -> None:
    task = _harbor_task(tmp_path / "src")
    (task / "instruction.md").unlink()
    (task / "instruction.md").symlink_to(secret_dir / "credentials")
    assert "link" in _imports_refused(task, tmp_path / "out")


def test_a_symlinked_environment_directory_is_refused(tmp_path: Path, secret_dir: Path) -> None:
    task = _harbor_task(tmp_path / "src")
    (task / "environment").rmdir()
    (task / "environment").symlink_to(secret_dir, target_is_directory=True)
    assert "link" in _imports_refused(task, tmp_path / "out")


def test_a_symlinked_tests_directory_is_refused(tmp_path: Path, secret_dir: Path) -> None:
    task = _tb_task(tmp_path / "src")
    (task / "tests" / "test_outputs.py").unlink()
    (task / "tests").rmdir()
    (task / "tests").symlink_to(secret_dir, target_is_directory=True)
    assert "link" in _imports_refused(task, tmp_path / "out")


@pytest.mark.parametrize("name", ["solution.sh", "run-tests.sh", "task.yaml"])
def test_a_symlinked_terminal_bench_file_is_refused(
    tmp_path: Path, secret_dir: Path, name: str
) -> None:
    task = _tb_task(tmp_path / "src")
    target = task / name
    if target.exists():
        target.unlink()
    if name == "task.yaml":  # the secret made to look like a task file
        (secret_dir / "credentials").write_text(f"instruction: {SECRET}\n")
    target.symlink_to(secret_dir / "credentials")
    assert "link" in _imports_refused(task, tmp_path / "out")


def test_a_fifo_instruction_does_not_hang_the_import(tmp_path: Path) -> None:
    task = _harbor_task(tmp_path / "src")
    (task / "instruction.md").unlink()
    os.mkfifo(task / "instruction.md")
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            import_terminal_bench(task, tmp_path / "out")
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the reader so the thread ends
        fd = os.open(task / "instruction.md", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail("the import blocked reading a FIFO")
    assert isinstance(outcome[0], UserError)


BOMB = """instruction: fix it
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
{field}: [*i, *i, *i, *i, *i, *i, *i, *i, *i, *i]
"""


@pytest.mark.parametrize("field", ["tags", "difficulty", "category"])
def test_a_yaml_alias_bomb_in_task_metadata_is_refused(tmp_path: Path, field: str) -> None:
    task = _tb_task(tmp_path / "src")
    (task / "task.yaml").write_text(BOMB.format(field=field))  # 10**10 strings once expanded
    message = _imports_refused(task, tmp_path / "out")
    assert field in message


def test_plain_metadata_still_imports(tmp_path: Path) -> None:
    task = _tb_task(tmp_path / "src")
    (task / "task.yaml").write_text(
        "instruction: fix it\ndifficulty: easy\ncategory: files\ntags: [a, b]\n"
    )
    result = import_terminal_bench(task, tmp_path / "out")
    assert result.count == 1


@pytest.mark.parametrize("name", ["tests", "solution", "task.toml"])
def test_a_symlinked_harbor_entry_is_refused(tmp_path: Path, secret_dir: Path, name: str) -> None:
    task = _harbor_task(tmp_path / "src")
    if name == "tests":
        (task / "tests" / "test.sh").unlink()
        (task / "tests").rmdir()
        (secret_dir / "test.sh").write_text("true\n")
        (task / "tests").symlink_to(secret_dir, target_is_directory=True)
    elif name == "solution":
        (secret_dir / "solve.sh").write_text(f"echo {SECRET}\n")
        (task / "solution").symlink_to(secret_dir, target_is_directory=True)
    else:
        (task / "task.toml").unlink()
        (secret_dir / "credentials").write_text(f"[metadata]\ndifficulty = '{SECRET}'\n")
        (task / "task.toml").symlink_to(secret_dir / "credentials")
    assert "link" in _imports_refused(task, tmp_path / "out")
