"""action.yml is wired right: it loads, every input and step output it reads exists, and every
``EVALSI_CI_*`` variable it sets is one the steps read (and the other way round)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

import evalsi.ci._action as action_module
from evalsi.ci._action import STEPS

ROOT = Path(__file__).resolve().parents[3]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
TEXT = (ROOT / "action.yml").read_text()
SOURCE = Path(action_module.__file__).read_text()
# what the Action reads of actions it uses (actions/upload-artifact@v4 documents artifact-url)
USES_OUTPUTS = {"actions/upload-artifact@v4": {"artifact-id", "artifact-url"}}


def _steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = ACTION["runs"]["steps"]
    return steps


def test_the_action_is_a_composite_with_a_name_and_described_inputs() -> None:
    assert ACTION["name"] == "evalsi"
    assert ACTION["runs"]["using"] == "composite"
    for name, spec in ACTION["inputs"].items():
        assert spec.get("description"), name
        assert "default" in spec, f"input {name}: every input is optional, with a default"
    for step in _steps():
        assert "uses" in step or step.get("shell") == "bash", step


def test_every_input_read_is_declared_and_every_declared_input_is_read() -> None:
    read = set(re.findall(r"\binputs\.([a-z][a-z0-9-]*)", TEXT))
    assert read == set(ACTION["inputs"])


def test_every_step_output_read_comes_from_a_step_that_writes_it() -> None:
    by_id = {s["id"]: s for s in _steps() if "id" in s}
    for step_id, output in re.findall(r"\bsteps\.([a-z-]+)\.outputs\.([a-z-]+)", TEXT):
        assert step_id in by_id, f"no step {step_id}"
        step = by_id[step_id]
        if "uses" in step:
            assert output in USES_OUTPUTS[step["uses"]], (step_id, output)
            continue
        script = re.fullmatch(r"python -m evalsi\.ci (\w+)", step["run"].strip())
        assert script, f"step {step_id} runs {step['run']!r}"
        assert script.group(1) in STEPS
        assert f'"{output}"' in SOURCE, f"python -m evalsi.ci {script.group(1)} writes no {output}"
    # a step's outputs are read only after it ran
    order = [s.get("id") for s in _steps()]
    for i, step in enumerate(_steps()):
        for step_id in re.findall(r"\bsteps\.([a-z-]+)\.outputs", str(step)):
            assert order.index(step_id) < i, f"step {i} reads {step_id} before it runs"


def test_the_variables_set_are_the_inputs_the_steps_read() -> None:
    read = {"EVALSI_CI_" + n.upper().replace("-", "_") for n in re.findall(
        r"(?:ctx|self)\.(?:input|flag)\(\"([a-z-]+)\"", SOURCE)}  # fmt: skip
    set_by_steps: set[str] = set()
    for step in _steps():
        names = {k for k in step.get("env", {}) if k.startswith("EVALSI_CI_")}
        if step.get("name") == "Install evalsi":
            assert names == {"EVALSI_CI_VERSION", "EVALSI_CI_PACKAGE"}
            continue
        assert names <= read, f"{step.get('name')}: {names - read} read by no step"
        set_by_steps |= names
    assert read == set_by_steps


def test_the_gate_step_ends_with_the_runs_exit_code_whatever_happened_before() -> None:
    gate = _steps()[-1]
    assert gate["name"] == "Gate"
    assert gate["if"].startswith("always()")
    assert 'exit "$EXIT_CODE"' in gate["run"]
    assert gate["env"]["EXIT_CODE"] == "${{ steps.run.outputs.exit-code }}"


def test_the_install_step_honours_package_then_version() -> None:
    import subprocess

    run = next(s for s in _steps() if s.get("name") == "Install evalsi")["run"]
    line = run.splitlines()[0]  # the requirement; the pip call after it is not run here
    cases = {
        ("", ""): "evalsi",
        ("", "0.1.0"): "evalsi==0.1.0",
        ("evalsi[text]==0.2", "0.1.0"): "evalsi[text]==0.2",
    }
    for (package, version), want in cases.items():
        env = {"EVALSI_CI_PACKAGE": package, "EVALSI_CI_VERSION": version, "PATH": "/usr/bin:/bin"}
        got = subprocess.run(
            ["bash", "-c", line + '\necho "$requirement"'],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert got == want


def test_the_example_workflow_uses_only_inputs_the_action_declares() -> None:
    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "evalsi.yml").read_text())
    assert workflow[True]["pull_request"] is None  # YAML 1.1 reads `on:` as true
    assert workflow["permissions"] == {
        "contents": "read",
        "actions": "read",
        "pull-requests": "write",
    }
    used = [
        step
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("evalsi/evalsi@")
    ]
    assert used
    for step in used:
        assert set(step["with"]) <= set(ACTION["inputs"])
        assert bool(step["with"].get("eval")) != bool(step["with"].get("spec"))
