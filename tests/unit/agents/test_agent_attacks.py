"""Hostile workspaces for the end-state snapshot, which runs on the host over a directory a
sandboxed program wrote: it must stay bounded, never follow a link out, never block on a FIFO,
and never fail the run over a name or a file it cannot read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from evalsi.agents import _checkers, snapshot
from evalsi.agents._checkers import task_fixtures
from evalsi.core import Content, Record, UserError
from evalsi.specs import run_spec_from_yaml


def test_a_name_that_is_not_utf8_is_escaped_and_the_snapshot_stays_json(tmp_path: Path) -> None:
    with open(os.fsencode(tmp_path) + b"/bad\xffname", "wb") as f:
        f.write(b"x")
    os.symlink(b"/etc/\xfe", os.fsencode(tmp_path) + b"/link\xfe")
    out = snapshot(tmp_path)
    orjson.dumps(out)  # was: TypeError (surrogates), which ended the whole run
    files = out["files"]
    assert isinstance(files, dict)
    assert files["bad\\xffname"] == {
        "size": 1,
        "sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
        "text": "x",
    }
    assert files["link\\xfe"] == {"symlink": "/etc/\\xfe"}


def test_a_directory_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    depth = sys.getrecursionlimit() + 100
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(depth):  # relative to a descriptor: past PATH_MAX too
            os.mkdir("a", dir_fd=fd)
            sub = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        out = snapshot(tmp_path)  # was: RecursionError
    finally:  # shutil.rmtree recurses too (Python 3.11): pytest's cleanup would fail
        subprocess.run(["rm", "-rf", str(tmp_path / "a")], check=True)
    files = out["files"]
    assert isinstance(files, dict)
    assert list(files) == ["a/" * depth + "f"]


def test_hashing_is_bounded_in_total_and_a_big_sparse_file_gets_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_checkers, "HASH_BYTES", 1 << 20)
    with open(tmp_path / "big", "wb") as f:
        f.truncate(1 << 40)  # a terabyte, sparse: free to make, hours to hash
    (tmp_path / "a").write_bytes(b"\0" * (700 << 10))
    (tmp_path / "b").write_bytes(b"\0" * (700 << 10))
    files = snapshot(tmp_path)["files"]
    assert isinstance(files, dict)
    assert files["big"] == {"size": 1 << 40, "sha256": None}
    assert isinstance(files["a"], dict)
    assert files["a"]["sha256"]
    assert files["b"] == {"size": 700 << 10, "sha256": None}  # the budget is spent


def test_the_scan_stops_after_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checkers, "SNAPSHOT_SCAN", 50)
    monkeypatch.setattr(_checkers, "SNAPSHOT_FILES", 10)
    for i in range(30):
        (tmp_path / f"d{i:02}").mkdir()
        (tmp_path / f"d{i:02}" / "f").write_text("x")
    out = snapshot(tmp_path)
    assert out["scan_stopped"] == "after 50 entries"
    assert out["unlisted_files"] == 10  # 30 directories and 20 files seen, 10 listed


def test_links_fifos_and_loops_are_described_never_followed(tmp_path: Path) -> None:
    os.symlink("/etc/passwd", tmp_path / "pw.json")
    os.symlink("/etc", tmp_path / "etc")
    os.symlink("loop", tmp_path / "loop")
    os.mkfifo(tmp_path / "p.json")
    files = snapshot(tmp_path)["files"]
    assert files == {
        "etc": {"symlink": "/etc"},
        "loop": {"symlink": "loop"},
        "p.json": {"kind": "special"},
        "pw.json": {"symlink": "/etc/passwd"},
    }


def test_a_file_swapped_for_a_link_after_the_look_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "x.json").write_text("{}")
    real_lstat = Path.lstat

    def swap_after_look(self: Path) -> os.stat_result:
        st = real_lstat(self)
        self.unlink()
        os.symlink("/etc/passwd", self)  # what a program still running could do
        return st

    monkeypatch.setattr(Path, "lstat", swap_after_look)
    files = snapshot(tmp_path)["files"]
    assert files == {"x.json": {"error": "cannot read: Too many levels of symbolic links"}}


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv to drop root")
def test_unreadable_files_and_directories_are_reported_not_raised() -> None:
    """chmod 000 stops a host that is not root; as root, drop to nobody to see it."""
    tmp_path = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        _unreadable(tmp_path)
    finally:
        for p in (tmp_path / "d", tmp_path / "s.json"):
            p.chmod(0o700)
        shutil.rmtree(tmp_path)


def _unreadable(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("secret")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    (tmp_path / "s.json").chmod(0)
    (tmp_path / "d").chmod(0)
    tmp_path.chmod(0o755)
    code = (
        "import orjson, pathlib; from evalsi.agents import snapshot; "
        f"print(orjson.dumps(snapshot(pathlib.Path({str(tmp_path)!r}))).decode())"
    )
    argv = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {
        "files": {
            "d": {"error": "cannot list: Permission denied"},
            "s.json": {"error": "cannot read: Permission denied"},
        }
    }


_SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {name: attacks}
spec:
  target:
    agent: {harness: {python: "h:H"}}
  environment:
    sandbox: {minIsolation: none}
    %s
  dataset: {path: tasks.jsonl}
  evaluators: [{ref: exact-match}]
"""


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (
            'fixtures: {files: {"a": "x", "a/b": "y"}}',
            "spec.environment.fixtures: file 'a' is also a directory of 'a/b'",
        ),
        (
            'fixtures: {files: {"%s": "x"}}' % ("n" * 256),
            "a name in the path is over 255 bytes",
        ),
        (
            "checkers: [{jsonFile: {path: /etc/passwd, expect: 1}}]",
            "spec.environment.checkers[0].jsonFile.path: expected a relative path without '.', "
            "'..' or empty parts, got '/etc/passwd'",
        ),
        (
            "checkers: [{jsonFile: {path: ../x.json, expect: 1}}]",
            "spec.environment.checkers[0].jsonFile.path: expected a relative path",
        ),
    ],
)
def test_workspace_paths_that_cannot_work_are_spec_errors(environment: str, message: str) -> None:
    """Each was accepted, then lost every task to infrastructure (an OSError, a
    SandboxFileError) or failed every check with 'cannot read'."""
    with pytest.raises(UserError) as info:
        run_spec_from_yaml(_SPEC % environment)
    assert message in str(info.value)


def test_a_sample_fixture_that_clashes_with_the_specs_is_that_samples_error() -> None:
    sample = Record(
        id="s1", input=Content.of_text("x"), metadata={"fixtures": {"files": {"a": "file"}}}
    )
    with pytest.raises(UserError, match="sample 's1': fixtures over the spec's: file 'a' is also"):
        task_fixtures({"a/b": "spec"}, sample)
    assert task_fixtures({"a": "spec"}, sample) == {"a": "file"}  # overriding a path is fine


def test_a_workspace_nested_deeper_than_pythons_stack_is_removed(tmp_path: Path) -> None:
    from evalsi.sandbox._workspace import remove_tree

    root = tmp_path / "deep"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(1500):  # past the recursion limit of os.walk / rmtree on 3.11
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    remove_tree(root)
    assert not root.exists()
