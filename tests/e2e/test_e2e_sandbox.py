"""``evalsi sandbox probe`` and ``evalsi sandbox run`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]

RUNGS = ["firecracker", "bwrap", "landlock", "none"]


def _probe(run_evalsi: RunCli, tmp_path: Path) -> dict[str, dict[str, object]]:
    proc = run_evalsi(tmp_path, "sandbox", "probe", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return {r["driver"]: r for r in json.loads(proc.stdout)["rungs"]}


def test_probe_json_lists_every_rung_with_a_reason(run_evalsi: RunCli, tmp_path: Path) -> None:
    rungs = _probe(run_evalsi, tmp_path)
    assert list(rungs) == RUNGS
    assert [r["level"] for r in rungs.values()] == ["vm", "namespaced", "confined", "none"]
    for rung in rungs.values():
        assert isinstance(rung["available"], bool)
        if not rung["available"]:
            assert rung["reason"], f"{rung['driver']} unavailable without a reason"
    assert rungs["none"]["available"] is True


def test_probe_table(run_evalsi: RunCli, tmp_path: Path) -> None:
    proc = run_evalsi(tmp_path, "sandbox", "probe")
    assert proc.returncode == 0, proc.stderr
    for name in RUNGS:
        assert name in proc.stdout
    assert "why not" in proc.stdout


def test_run_none_true_exits_0_and_reports_isolation(run_evalsi: RunCli, tmp_path: Path) -> None:
    proc = run_evalsi(
        tmp_path,
        "sandbox",
        "run",
        "--min-isolation",
        "none",
        "--format",
        "json",
        "--",
        "sh",
        "-c",
        "printf 'hi\\377'; echo oops >&2",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "exit"
    assert out["exit_code"] == 0
    assert out["stdout"] == "hi\ufffd"
    assert out["stderr"] == "oops\n"
    assert out["duration_ms"] >= 0
    assert set(out["isolation"]) >= {"driver", "level", "enforcement"}
    plain = run_evalsi(tmp_path, "sandbox", "run", "--min-isolation", "none", "--", "true")
    assert plain.returncode == 0, plain.stderr
    assert "sandbox: exit 0" in plain.stderr


def test_run_exit_code_follows_the_program_on_the_none_rung(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    proc = run_evalsi(
        tmp_path, "sandbox", "run", "--min-isolation", "none", "--", "sh", "-c", "echo out; exit 5"
    )
    assert proc.returncode == 5
    assert proc.stdout == "out\n"
    slow = run_evalsi(
        tmp_path,
        "sandbox",
        "run",
        "--min-isolation",
        "none",
        "--timeout",
        "0.5",
        "--format",
        "json",
        "--",
        "sleep",
        "30",
    )
    assert slow.returncode == 124
    assert json.loads(slow.stdout)["outcome"] == "timeout"


def test_run_on_the_strongest_rung_follows_the_exit_code(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    if not _probe(run_evalsi, tmp_path)["bwrap"]["available"]:
        pytest.skip("the bwrap rung is not available here")
    proc = run_evalsi(tmp_path, "sandbox", "run", "--format", "json", "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["exit_code"] == 3
    assert out["isolation"]["level"] in ("namespaced", "kernel", "vm")


def test_min_isolation_vm_fails_closed_and_runs_nothing(run_evalsi: RunCli, tmp_path: Path) -> None:
    if _probe(run_evalsi, tmp_path)["firecracker"]["available"]:
        pytest.skip("a vm rung works here")
    marker = tmp_path / "ran"
    proc = run_evalsi(
        tmp_path, "sandbox", "run", "--min-isolation", "vm", "--", "sh", "-c", f"touch {marker}"
    )
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: SANDBOX_UNAVAILABLE")
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--min-isolation", "foo", "--", "true"], "--min-isolation"),
        (["--timeout", "-1", "--", "true"], "--timeout"),
        (["--memory", "lots", "--", "true"], "--memory"),
        (["--network", "open", "--", "true"], "--network"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    run_evalsi: RunCli, tmp_path: Path, args: list[str], flag: str
) -> None:
    proc = run_evalsi(tmp_path, "sandbox", "run", *args)
    assert proc.returncode == 2
    assert flag in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_without_a_command_exits_2(run_evalsi: RunCli, tmp_path: Path) -> None:
    proc = run_evalsi(tmp_path, "sandbox", "run", "--min-isolation", "none")
    assert proc.returncode == 2
    assert "no command given" in proc.stderr


def test_help_teaches_with_examples(run_evalsi: RunCli, tmp_path: Path) -> None:
    proc = run_evalsi(tmp_path, "sandbox", "run", "--help")
    assert proc.returncode == 0
    assert "examples:" in proc.stdout
    assert "--min-isolation" in proc.stdout
    assert "SANDBOX_UNAVAILABLE" in proc.stdout


def test_config_turns_rungs_off_and_sets_a_floor(run_evalsi: RunCli, tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text(
        "sandbox:\n  drivers: [landlock, none]\n  minIsolation: confined\n"
    )
    rungs = _probe(run_evalsi, tmp_path)  # ./evalsi.yaml is read by default
    assert rungs["bwrap"]["reason"] == "turned off (sandbox.drivers)"
    assert rungs["firecracker"]["reason"] == "turned off (sandbox.drivers)"
    proc = run_evalsi(tmp_path, "sandbox", "run", "--min-isolation", "none", "--", "true")
    if rungs["landlock"]["available"]:
        assert proc.returncode == 0, proc.stderr
        assert "landlock (confined" in proc.stderr  # the floor lifted none to confined
    else:
        assert proc.returncode == 3, proc.stderr
        assert "at or above confined" in proc.stderr


def test_a_bad_config_is_a_user_error(run_evalsi: RunCli, tmp_path: Path) -> None:
    bad = tmp_path / "other.yaml"
    bad.write_text("sandbox:\n  drivers: [docker]\n")
    for sub in (["probe"], ["run"]):
        tail = ["--", "true"] if sub == ["run"] else []
        proc = run_evalsi(tmp_path, "sandbox", *sub, "--config", bad, *tail)
        assert proc.returncode == 2, proc.stderr
        assert "sandbox.drivers[0]: unknown rung 'docker'" in proc.stderr
        assert "Traceback" not in proc.stderr
    missing = run_evalsi(tmp_path, "sandbox", "probe", "--config", tmp_path / "nope.yaml")
    assert missing.returncode == 2
    assert "not found" in missing.stderr


def test_text_mode_streams_output_before_the_program_ends(tmp_path: Path) -> None:
    """The first line reaches our pipe while the sandboxed program still sleeps."""
    import sys
    import time

    evalsi = Path(sys.executable).with_name("evalsi")
    args = ["sandbox", "run", "--min-isolation", "none", "--"]
    script = "import time; print('first', flush=True); time.sleep(3); print('second')"
    proc = subprocess.Popen(
        [str(evalsi), *args, "python3", "-c", script],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        start = time.monotonic()
        first = proc.stdout.readline()
        waited = time.monotonic() - start
        assert first == b"first\n"
        assert proc.poll() is None, "the program had already ended: output was not streamed"
        rest, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert rest == b"second\n"
    assert proc.returncode == 0, err
    assert waited < 60


def test_env_flag_passes_variables_and_refuses_a_malformed_one(
    run_evalsi: RunCli, tmp_path: Path
) -> None:
    ok = run_evalsi(
        tmp_path, "sandbox", "run", "--min-isolation", "none", "--env", "GREETING=hi=there",
        "--format", "json", "--", "sh", "-c", 'echo "$GREETING"',
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["stdout"] == "hi=there\n"
    for bad in ("NOEQUALS", "=value"):
        proc = run_evalsi(tmp_path, "sandbox", "run", "--env", bad, "--", "true")
        assert proc.returncode == 2, proc.stderr
        assert f"expected KEY=VALUE, got '{bad}'" in proc.stderr
        assert "Traceback" not in proc.stderr
