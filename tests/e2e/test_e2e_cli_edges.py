"""Issue 16 at the console script: a mistyped flag shows the subcommand's usage and a "did you
mean" (exit 2); a store path that cannot be created exits 3 (the run could not
finish) with a message naming the path and why, and no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def test_mistyped_flag_and_command(cli: Any) -> None:
    proc = cli("eval", "--evaluater", "x")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: evalsi eval ")
    assert "did you mean --evaluators?" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = cli("comapre", "a", "b")
    assert proc.returncode == 2
    assert "did you mean 'compare'?" in proc.stderr


@pytest.mark.parametrize(
    ("store", "needle"),
    [
        ("/proc/nope/x.db", "cannot create the store directory /proc/nope"),
        ("plain-file/x.db", "plain-file is a file, not a directory"),
        ("plain-file/deeper/x.db", "plain-file is a file, not a directory"),
        ("/proc/x.db", "cannot open the store at /proc/x.db"),
    ],
)
def test_store_that_cannot_be_created_exits_3(
    cli: Any, write_jsonl: Any, tmp_path: Path, store: str, needle: str
) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "output": "a", "reference": "a"}])
    (tmp_path / "plain-file").write_text("not a directory\n")
    proc = cli("eval", "--data", "d.jsonl", "--evaluators", "exact-match", "--store", store)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: ")
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "sqlalche.me" not in proc.stderr
    assert (tmp_path / "plain-file").read_text() == "not a directory\n"
