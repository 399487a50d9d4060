"""A tiny repository with two bugs, and SWE-bench instances over it (the guide's example).

    python examples/agents-cli/make_repo.py          # calc/ and instances.jsonl beside this file
    python examples/agents-cli/make_repo.py DIR

``make_instances(root)`` builds a tiny Python package with a bug (``calc``: ``add`` subtracts,
``scale`` mishandles zero), commits it, and writes instances as the benchmark ships them: the
gold patch, a test patch adding the tests that expose each bug to the existing test file, and
``FAIL_TO_PASS`` / ``PASS_TO_PASS`` as JSON-encoded lists. The test names are not written by
hand: they are what ``python3 -m unittest -v`` prints for the patched repository (as SWE-bench
derives them by running the tests before and after the gold patch), so they match the
interpreter in use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalsi.benchmarks import parse_log

SOURCE = """def add(a, b):
    return a - b


def scale(x, k):
    if k == 0:
        return None
    return x * k


def double(x):
    return x * 2
"""

TESTS = """import unittest

from calc import double


class TestDouble(unittest.TestCase):
    def test_double(self):
        self.assertEqual(double(4), 8)

    def test_double_zero(self):
        self.assertEqual(double(0), 0)
"""

BUGS = {  # instance -> (the fix, the test added)
    "acme__calc-1": (
        ("return a - b", "return a + b"),
        "class TestAdd(unittest.TestCase):\n    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n",
    ),
    "acme__calc-2": (
        ("        return None\n", "        return 0\n"),
        "class TestScale(unittest.TestCase):\n    def test_scale_zero(self):\n"
        "        self.assertEqual(scale(3, 0), 0)\n",
    ),
}
TEST_COMMAND = ["python3", "-m", "unittest", "-v"]
_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, input=input, capture_output=True, text=True, check=True
    ).stdout


def make_repo(path: Path) -> str:
    """The buggy package as a git repository; returns the base commit."""
    (path / "calc").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "calc" / "__init__.py").write_text(SOURCE)
    (path / "tests" / "__init__.py").write_text("")
    (path / "tests" / "test_calc.py").write_text(TESTS)
    (path / ".gitignore").write_text("__pycache__/\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-qm", "calc")
    return git(path, "rev-parse", "HEAD").strip()


def _patch(repo: Path, base: str, edit: Any) -> str:
    """The diff one edit makes to the base commit (left uncommitted, then undone)."""
    edit(repo)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", base)
    git(repo, "reset", "-q", "--hard", base)
    return diff


def _statuses(repo: Path, *patches: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        git(repo, "worktree", "add", "-q", "--detach", str(work))
        try:
            for p in patches:
                if p:
                    git(work, "apply", "-", input=p)
            run = subprocess.run(
                [*TEST_COMMAND, "tests.test_calc"],
                cwd=work,
                capture_output=True,
                text=True,
                env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
            )
        finally:
            git(repo, "worktree", "remove", "--force", str(work))
    return parse_log(run.stdout + run.stderr, "unittest")


def make_instances(root: Path) -> tuple[Path, Path]:
    """The repository (``root/calc``) and the instances file (``root/instances.jsonl``)."""
    repo = root / "calc"
    base = make_repo(repo)
    rows = []
    for instance_id, ((old, new), test) in BUGS.items():

        def fix(r: Path, old: str = old, new: str = new) -> None:
            f = r / "calc" / "__init__.py"
            f.write_text(f.read_text().replace(old, new))

        def add_test(r: Path, test: str = test) -> None:
            f = r / "tests" / "test_calc.py"
            body = f.read_text().replace("import double", "import add, double, scale")
            f.write_text(f"{body}\n\n{test}")

        gold, test_patch = _patch(repo, base, fix), _patch(repo, base, add_test)
        before, after = _statuses(repo, test_patch), _statuses(repo, gold, test_patch)
        passing = sorted(t for t, s in after.items() if s == "ok")
        rows.append(
            {
                "instance_id": instance_id,
                "repo": "acme/calc",
                "base_commit": base,
                "problem_statement": f"{instance_id}: {test.splitlines()[0]} fails",
                "patch": gold,
                "test_patch": test_patch,
                "FAIL_TO_PASS": json.dumps([t for t in passing if before.get(t) != "ok"]),
                "PASS_TO_PASS": json.dumps([t for t in passing if before.get(t) == "ok"]),
                "version": "0.1",
            }
        )
    instances = root / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return repo, instances


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for old in (root / "calc", root / "instances.jsonl"):  # made again, from scratch
        if old.is_dir():
            shutil.rmtree(old)
        old.unlink(missing_ok=True)
    repo, instances = make_instances(root)
    print(f"{repo}: a git repository (add subtracts; scale(x, 0) is None)")
    print(f"{instances}: {len(instances.read_text().splitlines())} SWE-bench instances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
