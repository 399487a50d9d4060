"""Issue 19's finish line, as a user runs it: the helpdesk seed pack run with a system
declaration writes a bundle with a registered plan; validate, gate (0 known-good, 1 known-bad
naming the hard gates, 2 without a declaration), sign and verify with ssh-keygen, and rescore
(MATCH; DIFFER after a score is edited and the manifest re-hashed; CODE_CHANGED after an
evaluator changed) behave as the guide says, through the CLI and from a real ``evalsi serve``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.bundles import reseal as _reseal

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "examples" / "agent" / "helpdesk"
EVERYTHING = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
EVALSI = str(Path(sys.executable).with_name("evalsi"))
ENV = {**os.environ, "PYTHONPATH": f"{PACK}:{ROOT / 'src'}"}

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not EVERYTHING.exists() or shutil.which("ssh-keygen") is None,
    reason="Node.js, @modelcontextprotocol/server-everything or ssh-keygen is missing "
    "(.ci/run installs them)",
)


def evalsi(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EVALSI, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600, check=False
    )


def _pack_run(tmp: Path, spec: str, out: str, *, declared: bool = True) -> Path:
    args = ["run", "-f", str(PACK / spec), "--store", str(tmp / "s.db"), "-q"]
    if declared:
        args += ["--declaration", str(PACK / "system.yaml")]
    done = evalsi(*args, "--bundle", str(tmp / out))
    assert done.returncode in (0, 1), done.stderr
    assert "bundle written to" in done.stderr
    return tmp / out


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("evidence")
    return {
        "good": _pack_run(tmp, "run-scripted-good.yaml", "good"),
        "bad": _pack_run(tmp, "run-scripted-bad.yaml", "bad"),
        "undeclared": _pack_run(tmp, "run-scripted-good.yaml", "undeclared", declared=False),
    }


def _copy(bundle: Path, tmp: Path) -> Path:
    out = tmp / bundle.name
    shutil.copytree(bundle, out)
    return out


def test_a_declared_run_writes_a_bundle_with_its_registered_plan(bundles: dict[str, Path]) -> None:
    good = bundles["good"]
    done = evalsi("bundle", "validate", str(good))
    assert done.returncode == 0, done.stdout
    assert "Status: PASS" in done.stdout
    assert "Tasks: 60" in done.stdout  # 20 scenarios x 3 trials
    plan = json.loads((good / "test_plan.json").read_text())
    meta = json.loads((good / "metadata.json").read_text())
    assert (
        meta["test_plan_sha256"]
        == "sha256:" + hashlib.sha256((good / "test_plan.json").read_bytes()).hexdigest()
    )
    assert plan["declared"] is True
    assert plan["declaration"]["system"]["name"] == "helpdesk-agent"
    assert len(plan["scenarios"]["selected"]) == 20
    task = next(t for t in plan["thresholds"] if t["category"] == "task-execution")
    assert (task["min"], task["source"], task["tightens"]) == (1.0, "declaration", {"min": 0.9})
    tool_calls = (good / "tool_calls.jsonl").read_text().splitlines()
    end_states = (good / "end_states.jsonl").read_text().splitlines()
    assert len(tool_calls) > 60
    assert len(end_states) == 60


def test_gate_passes_the_good_run_fails_the_bad_and_cannot_judge_the_undeclared(
    bundles: dict[str, Path],
) -> None:
    good = evalsi("gate", "--bundle", str(bundles["good"]))
    assert good.returncode == 0, good.stdout
    assert "GATE: PASS" in good.stdout
    bad = evalsi("gate", "--bundle", str(bundles["bad"]), "--format", "json")
    assert bad.returncode == 1, bad.stdout
    verdict = json.loads(bad.stdout)
    missed = {t["category"] for t in verdict["thresholds"] if t["gates"] and t["verdict"] != "met"}
    assert missed == {"task-execution", "tool-calling", "policy-compliance"}
    assert all(c in verdict["reason"] for c in missed)
    comparative = next(t for t in verdict["thresholds"] if t["category"] == "robustness")
    assert (comparative["gates"], comparative["verdict"]) == (False, "missed")  # reported only
    undeclared = evalsi("gate", "--bundle", str(bundles["undeclared"]))
    assert undeclared.returncode == 2, undeclared.stdout
    assert "declared no system" in undeclared.stdout


def test_sign_then_verify_prints_who_signed_and_a_tampered_bundle_cannot_be_judged(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    bundle = _copy(bundles["good"], tmp_path)
    key = tmp_path / "release_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "qa@example.org", "-f", str(key)],
        check=True,
    )
    public = key.with_suffix(".pub").read_text().split()
    signers = tmp_path / "allowed_signers"
    signers.write_text(f'qa@example.org namespaces="evalsi-bundle" {public[0]} {public[1]}\n')
    assert evalsi("bundle", "sign", str(bundle), "--key", str(key)).returncode == 0
    again = evalsi("bundle", "sign", str(bundle), "--key", str(key))
    assert again.returncode == 2
    assert "--force" in again.stderr
    verified = evalsi("bundle", "validate", str(bundle), "--allowed-signers", str(signers))
    assert verified.returncode == 0, verified.stdout
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key.with_suffix(".pub"))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert f"Signature: verified: qa@example.org ({fingerprint})" in verified.stdout
    gate = evalsi(
        "gate", "--bundle", str(bundle), "--require-signature", "--allowed-signers", str(signers)
    )
    assert gate.returncode == 0, gate.stdout
    # One byte of one record changed, the manifest re-hashed to match: the signature no longer
    # covers the manifest, so a gate that requires it cannot judge.
    records = bundle / "records.jsonl"
    records.write_bytes(records.read_bytes().replace(b"ada@example.com", b"eve@example.com", 1))
    _reseal(bundle)
    tampered = evalsi(
        "gate", "--bundle", str(bundle), "--require-signature", "--allowed-signers", str(signers)
    )
    assert tampered.returncode == 2, tampered.stdout
    unsigned = evalsi("gate", "--bundle", str(bundles["good"]), "--require-signature")
    assert unsigned.returncode == 2
    assert "--allowed-signers" in unsigned.stdout


def test_rescore_matches_then_differs_after_a_score_is_edited_and_rehashed(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    assert evalsi("rescore", str(bundles["good"])).returncode == 0
    bundle = _copy(bundles["good"], tmp_path)
    # Swap two tasks' step counts: every mean, case and figure stays as it was, so the bundle
    # validates once re-hashed; only grading the records again shows the edit.
    lines = [orjson.loads(x) for x in (bundle / "scores.jsonl").read_bytes().splitlines()]
    steps = [s for line in lines for s in line["scores"] if s.get("name") == "task-steps"]
    first, second = next((a, b) for a in steps for b in steps if a["number"] != b["number"])
    first["number"], second["number"] = second["number"], first["number"]
    (bundle / "scores.jsonl").write_bytes(
        b"".join(orjson.dumps(x, option=orjson.OPT_SORT_KEYS) + b"\n" for x in lines)
    )
    assert evalsi("bundle", "validate", str(bundle)).returncode == 1  # the hash moved
    _reseal(bundle)
    assert evalsi("bundle", "validate", str(bundle)).returncode == 0
    out = tmp_path / "rescore.json"
    done = evalsi("rescore", str(bundle), "--json", str(out))
    assert done.returncode == 1, done.stdout
    assert "RESCORE: DIFFER" in done.stdout
    comparison = json.loads(out.read_text())
    assert comparison["differing"] == 2
    assert {d["evaluator"] for d in comparison["differences"]} == {"agent-efficiency"}
    inside = evalsi("rescore", str(bundle), "--json", str(bundle / "x.json"))
    assert inside.returncode == 2
    assert not (bundle / "x.json").exists()


def test_rescore_says_code_changed_after_an_evaluator_changes(tmp_path: Path) -> None:
    ev = tmp_path / "checks.py"
    ev.write_text(
        "from evalsi import evaluator\n\n"
        "@evaluator(name='short-answer')\n"
        "def short_answer(record) -> bool:\n"
        "    return len(record.output.as_text()) <= 12\n",
        encoding="utf-8",
    )
    shutil.copy(ROOT / "examples" / "qa.jsonl", tmp_path / "qa.jsonl")
    done = evalsi(
        "eval",
        "--data",
        "qa.jsonl",
        "--evaluators",
        "./checks.py:short_answer,exact-match",
        "--declaration",
        str(ROOT / "examples" / "evidence" / "qa-system.yaml"),
        "--bundle",
        "evidence",
        "-q",
        cwd=tmp_path,
    )
    assert done.returncode in (0, 1), done.stderr
    assert evalsi("rescore", "evidence", cwd=tmp_path).returncode == 0
    ev.write_text(ev.read_text(encoding="utf-8").replace("<= 12", "<= 3"), encoding="utf-8")
    changed = evalsi("rescore", "evidence", cwd=tmp_path)
    assert changed.returncode == 3, changed.stdout
    assert "RESCORE: CODE_CHANGED" in changed.stdout
    assert "short-answer" in changed.stdout


# -- the same from a server ----------------------------------------------------------------------


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    """``evalsi serve`` from the repository root (the pack's MCP commands are relative to it),
    allowed to run the pack's Python tools and checkers, its data under ``tmp_path``."""
    port = _port()
    config = tmp_path / "evalsi.yaml"
    config.write_text(
        f"server: {{port: {port}}}\nallowPythonTargets: true\ndataDir: {tmp_path / 'data'}\n"
    )
    proc = subprocess.Popen(
        [EVALSI, "serve", "--config", str(config)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "evalsi serve exited"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "evalsi serve never listened"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_server_run_is_sealed_and_judged_the_same_way(serve: str, tmp_path: Path) -> None:
    done = evalsi(
        "run",
        "-f",
        str(PACK / "run-scripted-good.yaml"),
        "--server",
        serve,
        "--declaration",
        str(PACK / "system.yaml"),
        "--bundle",
        str(tmp_path / "remote"),
        "-q",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    assert evalsi("bundle", "validate", str(tmp_path / "remote")).returncode == 0
    assert evalsi("gate", "--bundle", str(tmp_path / "remote")).returncode == 0
    assert evalsi("rescore", str(tmp_path / "remote")).returncode == 0
    again = evalsi("bundle", run_id, "-o", str(tmp_path / "again"), "--server", serve)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == sorted(
        p.name for p in (tmp_path / "remote").iterdir()
    )
    plan: Any = json.loads((tmp_path / "again" / "test_plan.json").read_text())
    assert plan["declared"] is True
