"""Terminal-Bench and Harbor tasks as an agent run: each task directory becomes a sample (the
instruction as input, the environment's files as fixtures, the tests as a hidden verifier, the
reference solution as a known trajectory), and one EvalRun spec runs them all in sandboxes.

Two layouts are read. **Terminal-Bench**: ``task.yaml`` (``instruction``, or the older
``descriptions: [{key: base, description}]``; ``difficulty``, ``category``, ``tags``,
``max_agent_timeout_sec``, ``max_test_timeout_sec``, ``parser_name``), ``run-tests.sh`` (at the
top or in ``tests/``), ``tests/`` and ``solution.sh`` or ``solution.yaml``; every other file
(Dockerfile and compose files aside) is the environment. **Harbor**: ``task.toml``
(``[metadata]``, ``[agent] timeout_sec``, ``[verifier] timeout_sec``), ``instruction.md``,
``environment/`` (Dockerfile aside), ``tests/test.sh`` and ``solution/solve.sh``.

Scoring is the benchmark's. Terminal-Bench parses pytest's ``-rA`` summary: resolved when at
least one test passed and none failed, errored or was skipped. Harbor reads the reward the
verifier wrote to ``/logs/verifier/reward.txt`` (or ``reward.json``): resolved when it is 1.
``.evalsi-bench/verify.sh`` applies that rule in the sandbox and exits 0 exactly then.

There is no container: the workspace stands for the image's working directory (``/app``), and
the absolute paths the benchmarks' shell scripts use (``/app``, ``/tests``, ``/logs``) are
rewritten to the workspace's in ``.sh`` files; a Python test that hard-codes ``/app`` cannot be
rewritten and fails. Whatever the Dockerfile installs must already be on the machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.benchmarks._imported import (
    Imported,
    field_of,
    read_text,
    read_toml,
    read_yaml_mapping,
    unique_ids,
    write_rows,
    write_spec,
)
from evalsi.benchmarks._verifier import STAGE_DIR
from evalsi.core import UserError

ORACLE: dict[str, Any] = {"connector": "scripted", "model": "gold"}
"""The default agent: the task's own solution, played through the sandbox's ``exec`` tool
(Harbor's ``oracle`` agent): a spec that proves each task solvable before a model tries."""

_TB_SKIP = {"task.yaml", "Dockerfile", "docker-compose.yaml", "docker-compose.yml"}
_TB_SKIP |= {"run-tests.sh", "solution.sh", "solution.yaml"}
_DOCKER = {"Dockerfile", "docker-compose.yaml", "docker-compose.yml", ".dockerignore"}
_MAX_FILES = 500
_ABSOLUTE = re.compile(r"(?<![\w./$-])/(app|tests|logs)(?=[/\s\"';:)]|$)")
_REWRITE = {
    "app": "$EVALSI_WORKSPACE",
    "tests": f"$EVALSI_WORKSPACE/{STAGE_DIR}/tests",
    "logs": f"$EVALSI_WORKSPACE/{STAGE_DIR}/logs",
}
_PRELUDE = 'export EVALSI_WORKSPACE="${EVALSI_WORKSPACE:-$PWD}"\n'


def import_terminal_bench(
    src: Path | Sequence[Path],
    out_dir: Path,
    *,
    model: Mapping[str, Any] | None = None,
    name: str = "terminal-bench",
) -> Imported:
    """Read Terminal-Bench or Harbor task directories into ``out_dir/tasks.jsonl`` and an
    EvalRun spec ``out_dir/run.yaml`` whose built-in agent works in each task's sandbox with
    ``exec``, ``read_file`` and ``write_file``, graded by the benchmark's verifier.

    Args:
        src: a task directory, a directory of task directories, or several of either.
        out_dir: where the dataset and the spec go (created).
        model: the agent's model (``target.agent.model``); default the oracle, which plays
            each task's reference solution.
        name: the spec's ``metadata.name``.

    Raises:
        UserError: no task found, two tasks with one id, or a task file missing or malformed
            (the message names the file and the field).
    """
    dirs = _task_dirs([src] if isinstance(src, Path) else list(src))
    rows = [_row(d) for d in dirs]
    unique_ids((r["id"] for r in rows), "terminal-bench tasks")
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = out_dir / "tasks.jsonl"
    count = write_rows(dataset, rows)
    agent_timeout = max(r["metadata"]["agent_timeout_sec"] for r in rows)
    test_timeout = max(r["metadata"]["test_timeout_sec"] for r in rows)
    spec_path = out_dir / "run.yaml"
    write_spec(spec_path, _spec(name, model or ORACLE, agent_timeout, test_timeout), _HEADER)
    return Imported(dataset, spec_path, count)


_HEADER = """Terminal-Bench / Harbor tasks imported by evalsi.benchmarks.import_terminal_bench.
The agent works in each task's sandbox; after it stops, stage-verifier writes the task's tests
to .evalsi-bench/ and `tests` runs them there: task-success is the benchmark's "resolved".
The default model is the oracle (each task's solution.sh); put your model here instead, e.g.
  model: {connector: openai-compatible, baseUrl: "http://127.0.0.1:8000/v1", model: m}"""


def _spec(
    name: str, model: Mapping[str, Any], agent_timeout: float, test_timeout: float
) -> dict[str, Any]:
    seconds = int(max(agent_timeout, test_timeout))
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name},
        "spec": {
            "target": {
                "agent": {
                    "model": dict(model),
                    "maxSteps": 50,
                    "maxDuration": f"{int(agent_timeout)}s",
                }
            },
            "environment": {
                "tools": [{"sandbox": {"tools": ["exec", "read_file", "write_file"]}}],
                "sandbox": {
                    "minIsolation": "namespaced",
                    "network": "deny",
                    "timeoutSeconds": seconds,
                },
                "checkers": [
                    {"python": "evalsi.benchmarks:stage_verifier", "name": "stage-verifier"},
                    {
                        "exitCode": {"command": ["bash", f"{STAGE_DIR}/verify.sh"]},
                        "name": "tests",
                    },
                ],
            },
            "dataset": {"path": "tasks.jsonl"},
            "evaluators": [{"ref": "task-success"}, {"ref": "agent-efficiency"}],
        },
    }


def _task_dirs(sources: list[Path]) -> list[Path]:
    found: list[Path] = []
    for src in sources:
        if not src.is_dir():
            raise UserError(
                f"{src}: not a directory (expected a task directory or a folder of them)"
            )
        if _is_task(src):
            found.append(src)
            continue
        found.extend(d for d in sorted(src.iterdir()) if d.is_dir() and _is_task(d))
    if not found:
        shown = ", ".join(str(s) for s in sources) or "(no source)"
        raise UserError(
            f"{shown}: no task found",
            hint="a Terminal-Bench task directory holds task.yaml; a Harbor one, task.toml",
        )
    return found


def _is_task(d: Path) -> bool:
    return (d / "task.yaml").is_file() or (d / "task.toml").is_file()


def _row(task: Path) -> dict[str, Any]:
    if (task / "task.yaml").is_file() and (task / "task.toml").is_file():
        raise UserError(f"{task}: both task.yaml and task.toml: which layout is it?")
    if (task / "task.toml").is_file():
        return _harbor(task)
    return _terminal_bench(task)


def _terminal_bench(task: Path) -> dict[str, Any]:
    conf_path = _inside(task, "task.yaml")
    conf = read_yaml_mapping(conf_path, "task file")
    instruction = _instruction(conf, str(conf_path))
    parser = conf.get("parser_name", "pytest")
    if parser != "pytest":
        raise UserError(
            f"{conf_path}: parser_name {parser!r} is not supported",
            hint="only pytest's result summary is read (the default)",
        )
    tests_dir = _inside(task, "tests")
    if not tests_dir.is_dir():
        raise UserError(f"{tests_dir}: the tests directory is missing")
    tests = _files(tests_dir, "tests/")
    if _inside(task, "run-tests.sh").is_file():
        run_tests = _read(task, "run-tests.sh", "test runner")
    elif "tests/run-tests.sh" in tests:
        run_tests = tests["tests/run-tests.sh"]
    else:  # Terminal-Bench's default: pytest on the tests, with the summary the parser reads
        run_tests = 'python3 -m pytest "$TEST_DIR/test_outputs.py" -rA\n'
    verifier = {**tests, "run-tests.sh": run_tests, "verify.sh": _TB_VERIFY}
    env = {
        rel: content
        for rel, content in _files(task, "").items()
        if rel not in _TB_SKIP and not rel.startswith("tests/")
    }
    solution = _tb_solution(task)
    meta = {
        "benchmark": "terminal-bench",
        **_labels(conf, str(conf_path)),
        "agent_timeout_sec": _seconds(conf, "max_agent_timeout_sec", 360.0, str(conf_path)),
        "test_timeout_sec": _seconds(conf, "max_test_timeout_sec", 60.0, str(conf_path)),
    }
    return _assemble(task.name, instruction, meta, env, verifier, solution)


def _harbor(task: Path) -> dict[str, Any]:
    conf_path = _inside(task, "task.toml")
    conf = read_toml(conf_path, "task file")
    where = str(conf_path)
    metadata = _table(conf, "metadata", where)
    agent = _table(conf, "agent", where)
    verifier_conf = _table(conf, "verifier", where)
    instruction = _read(task, "instruction.md", "instruction")
    tests_dir = _inside(task, "tests")
    if not (tests_dir / "test.sh").is_file():
        raise UserError(f"{tests_dir / 'test.sh'}: the verifier's entry point is missing")
    verifier = {**_files(tests_dir, "tests/"), "verify.sh": _HARBOR_VERIFY}
    env_dir = _inside(task, "environment")
    env = {}
    if env_dir.is_dir():
        env = {k: v for k, v in _files(env_dir, "").items() if k not in _DOCKER}
    solution = None
    if _inside(task, "solution", "solve.sh").is_file():
        solution = _read(task, "solution/solve.sh", "solution")
    meta = {
        "benchmark": "harbor",
        **_labels(metadata, f"{where}: [metadata]", also=("keywords",)),
        "agent_timeout_sec": _seconds(agent, "timeout_sec", 600.0, f"{where}: [agent]"),
        "test_timeout_sec": _seconds(verifier_conf, "timeout_sec", 600.0, f"{where}: [verifier]"),
    }
    return _assemble(task.name, instruction, meta, env, verifier, solution)


def _assemble(
    task_id: str,
    instruction: str,
    meta: dict[str, Any],
    env: dict[str, str],
    verifier: dict[str, str],
    solution: str | None,
) -> dict[str, Any]:
    ours = verifier.pop("verify.sh")  # evalsi's own script: never rewritten
    rewritten = [rel for rel, c in verifier.items() if rel.endswith(".sh") and _ABSOLUTE.search(c)]
    verifier = {rel: _rewrite(c) if rel.endswith(".sh") else c for rel, c in verifier.items()}
    verifier["verify.sh"] = ours
    known: dict[str, Any] = {"empty": {"steps": [_said("I did nothing.")]}}
    if solution is not None:
        script = _PRELUDE + _rewrite(solution)
        call = {"name": "exec", "arguments": {"command": ["bash", "-c", script]}}
        steps = [{"kind": "tool_call", "name": "exec", "tool_call": call}, _said("Done.")]
        known["gold"] = {"steps": steps}
    meta = {k: v for k, v in meta.items() if v is not None}
    meta.update(
        {
            "fixtures": {"files": env},
            "verifier": {"files": verifier, "rewritten": rewritten},
            "known": known,
        }
    )
    return {"id": task_id, "input": instruction.strip(), "metadata": meta}


def _said(text: str) -> dict[str, Any]:
    return {"kind": "message", "name": "assistant", "output": text}


def _rewrite(script: str) -> str:
    return _ABSOLUTE.sub(lambda m: _REWRITE[m.group(1)], script)


def _instruction(conf: Mapping[str, Any], where: str) -> str:
    if "instruction" in conf:
        text = field_of(conf, "instruction", str, where)
    elif "descriptions" in conf:
        descriptions = field_of(conf, "descriptions", list, where)
        base = [
            d.get("description")
            for d in descriptions
            if isinstance(d, dict) and d.get("key", "base") == "base"
        ]
        if not base or not isinstance(base[0], str):
            raise UserError(f"{where}: descriptions has no {{key: base, description: TEXT}} entry")
        text = base[0]
    else:
        raise UserError(f"{where}: the field 'instruction' is missing")
    if not text.strip():
        raise UserError(f"{where}: the field 'instruction' is empty")
    return str(text)


def _tb_solution(task: Path) -> str | None:
    if _inside(task, "solution.sh").is_file():
        return _read(task, "solution.sh", "solution")
    path = _inside(task, "solution.yaml")
    if not path.is_file():
        return None
    import yaml  # the YAML form is rare: a list of {command} entries run in order

    try:
        steps = yaml.safe_load(_read(task, "solution.yaml", "solution"))
    except yaml.YAMLError as e:
        raise UserError(f"{path}: the solution is not valid YAML: {e}") from None
    if not isinstance(steps, list) or not all(
        isinstance(s, dict) and isinstance(s.get("command"), str) for s in steps
    ):
        raise UserError(f"{path}: expected a list of {{command: TEXT}} entries")
    return "\n".join(s["command"] for s in steps) + "\n"


def _inside(task: Path, *parts: str) -> Path:
    """``task/parts...`` with no symbolic link on the way: a task's text goes to the agent and
    its model, so a link to a file elsewhere on the host (credentials) must not be read."""
    path = task
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise UserError(f"{path}: a symbolic link; a task's files must be plain files")
    return path


def _read(task: Path, rel: str, what: str) -> str:
    """A task file's text; a FIFO, device or directory is refused (never opened: a FIFO
    would block the import)."""
    path = _inside(task, *rel.split("/"))
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: the {what} is not a regular file")
    return read_text(path, what)


def _labels(conf: Mapping[str, Any], where: str, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """``difficulty`` and ``category`` (text) and ``tags`` (a list of text) checked: they go
    into every row, and a YAML alias bomb there would expand to billions of strings."""
    out: dict[str, Any] = {}
    for key in ("difficulty", "category"):
        value = conf.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
            raise UserError(f"{where}: the field {key!r} must be text, got {type(value).__name__}")
        out[key] = value
    key = next((k for k in ("tags", *also) if conf.get(k)), "tags")
    tags = conf.get(key) or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise UserError(f"{where}: the field {key!r} must be a list of text")
    out["tags"] = tags
    return out


def _table(conf: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = conf.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"{where}: [{key}] must be a table, got {type(value).__name__}")
    return value


def _seconds(conf: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = conf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UserError(f"{where}: the field {key!r} must be a positive number of seconds")
    return float(value)


def _files(root: Path, prefix: str) -> dict[str, str]:
    """Every regular file under ``root`` as text, by its path relative to ``root``."""
    if root.is_symlink():
        raise UserError(f"{root}: a symbolic link; a task's files must be plain files")
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise UserError(f"{path}: a symbolic link; a task's files must be plain files")
        if not path.is_file():
            continue
        rel = prefix + path.relative_to(root).as_posix()
        if len(out) >= _MAX_FILES:
            raise UserError(f"{root}: more than {_MAX_FILES} files")
        try:
            out[rel] = read_text(path, "task file")
        except UserError as e:
            if "not UTF-8" in e.message:
                raise UserError(
                    f"{path}: a binary file; evalsi's fixtures and verifiers are text"
                ) from None
            raise
    return out


_TB_VERIFY = f"""#!/bin/bash
# evalsi: Terminal-Bench's verdict. run-tests.sh's pytest -rA summary: resolved when a test
# passed and none failed, errored or was skipped.
export EVALSI_WORKSPACE="$PWD"
B="$PWD/{STAGE_DIR}"
export TEST_DIR="$B/tests"
mkdir -p "$B/logs"
bash "$B/run-tests.sh" > "$B/logs/tests.log" 2>&1
code=$?
# the checker keeps the last lines of stderr: the failed tests, then the verdict
grep -E '^(FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "$B/logs/tests.log" | cut -c1-160 | tail -n 2 >&2
if grep -Eq '^(FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "$B/logs/tests.log"; then
  echo "evalsi: not resolved: a test did not pass" >&2; exit 1
fi
if ! grep -Eq '^PASSED ' "$B/logs/tests.log"; then
  echo "evalsi: not resolved: no test passed (run-tests.sh exit $code)" >&2; exit 1
fi
echo "evalsi: resolved" >&2
"""

_HARBOR_VERIFY = f"""#!/bin/bash
# evalsi: Harbor's verdict. tests/test.sh writes the reward to /logs/verifier/reward.txt (or
# reward.json): resolved when it is 1.
export EVALSI_WORKSPACE="$PWD"
B="$PWD/{STAGE_DIR}"
mkdir -p "$B/logs/verifier" "$B/logs/agent"
bash "$B/tests/test.sh" > "$B/logs/tests.log" 2>&1
code=$?
if [ -f "$B/logs/verifier/reward.txt" ]; then
  r=$(tr -d ' \\t\\r\\n' < "$B/logs/verifier/reward.txt")
elif [ -f "$B/logs/verifier/reward.json" ]; then
  r=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("reward", ""))' \\
      "$B/logs/verifier/reward.json")
else
  echo "evalsi: not resolved: test.sh wrote no reward (exit $code)" >&2; exit 1
fi
if awk -v r="$r" 'BEGIN {{ exit !(r ~ /^[0-9.eE+-]+$/ && r + 0 >= 1) }}'; then
  echo "evalsi: resolved (reward $r)" >&2; exit 0
fi
echo "evalsi: not resolved (reward $r)" >&2; exit 1
"""
