"""`evalsi plugin install` as a user runs it: the acme test plugin (tests/fixtures/plugins)
installed into a real virtual environment of its own under the project's data dir, listed in
the catalog with its params schema, graded by ref through `evalsi eval` and a run spec, then
removed. The install builds a venv with pip (about two minutes on the 2-core machine, from a
warm pip cache: decision 0014), so it runs once for the module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "plugins" / "acme-plugin"

pytestmark = pytest.mark.slow

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {name: plugin-by-ref}
spec:
  target: {python: "echo_target:answer", timeoutSeconds: 5}
  dataset: {path: questions.jsonl, fields: {output: ""}}
  evaluators:
    - ref: acme/length
    - ref: acme/shouty
      params: {min_ratio: 0.4}
    - ref: exact-match
      params: {ignore_case: true}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, run_evalsi: Any) -> tuple[Path, float]:
    """A project folder with acme installed (``.evalsi/plugins``), and how long it took."""
    where = tmp_path_factory.mktemp("project")
    source = where / "acme-plugin"
    shutil.copytree(FIXTURE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    started = time.monotonic()
    done = run_evalsi(
        where, "plugin", "install", source, "--evalsi", ROOT, "--format", "json", timeout=600
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    return where, seconds


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def test_install_list_catalog_eval_remove(project: tuple[Path, float], run_evalsi: Any) -> None:
    where, seconds = project
    print(f"plugin install took {seconds:.1f}s")  # the measurement decision 0014 quotes
    venv = where / ".evalsi" / "plugins" / "acme-plugin"
    assert (venv / "bin" / "python").exists()

    listed = _json(run_evalsi(where, "plugin", "list", "--format", "json"))["plugins"]
    assert [(p["name"], p["version"]) for p in listed] == [("acme", "1.2.0")]
    assert "acme/shouty@1.0.0" in listed[0]["evaluators"]

    catalog = _json(run_evalsi(where, "catalog", "list", "--format", "json"))["evaluators"]
    shouty = next(e for e in catalog if e["ref"] == "acme/shouty@1.0.0")
    assert shouty["params_schema"]["properties"]["min_ratio"]["default"] == 0.5
    assert any(e["name"] == "exact-match" for e in catalog)  # the built-ins are still there
    shown = _json(run_evalsi(where, "catalog", "show", "acme/shouty", "--format", "json"))
    assert shown["description"].startswith("Passes when at least min_ratio")

    rows = [{"id": "a", "output": "HELLO world"}, {"id": "b", "output": "quiet"}]
    (where / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = _json(
        run_evalsi(
            where,
            "eval",
            "--data",
            "qa.jsonl",
            "--evaluators",
            "acme/shouty,exact-match,acme/python",
            "--param",
            "acme/shouty.min_ratio=0.4",
            "--format",
            "json",
        )
    )
    metrics = {m["evaluator"]: m for m in out["metrics"]}
    assert metrics["shouty"]["mean"] == 0.5
    assert metrics["shouty"]["scored"] == 2
    # graded inside the plugin's own venv, not evalsi's
    labels = metrics["python"]["labels"]
    assert list(labels) == [str(venv)], labels

    bad = run_evalsi(
        where,
        "eval",
        "--data",
        "qa.jsonl",
        "--evaluators",
        "acme/shouty",
        "--param",
        "acme/shouty.min_ratio=loud",
    )
    assert bad.returncode == 2
    assert "min_ratio" in bad.stderr
    assert "Traceback" not in bad.stderr

    # and by ref in a run spec, next to a built-in, on a Python target's outputs
    shutil.copy(ROOT / "examples" / "echo_target.py", where)
    shutil.copy(ROOT / "examples" / "qa.jsonl", where / "questions.jsonl")
    (where / "run.yaml").write_text(SPEC)
    env = {"PYTHONPATH": os.pathsep.join([str(where), os.environ.get("PYTHONPATH", "")])}
    ran = _json(run_evalsi(where, "run", "-f", "run.yaml", "--format", "json", env=env))
    by_name = {m["evaluator"]: m for m in ran["metrics"]}
    assert (
        by_name["length"]["scored"]
        == by_name["exact-match"]["scored"] + by_name["exact-match"]["skipped"]
    )
    assert by_name["length"]["scored"] == 20
    assert by_name["shouty"]["scored"] == 20

    gone = run_evalsi(where, "plugin", "remove", "acme")
    assert gone.returncode == 0, gone.stderr
    assert not venv.exists()
    assert _json(run_evalsi(where, "plugin", "list", "--format", "json")) == {"plugins": []}
    missing = run_evalsi(where, "plugin", "remove", "acme")
    assert missing.returncode == 2
    assert "no plugin 'acme' is installed" in missing.stderr
