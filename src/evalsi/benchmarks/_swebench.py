"""SWE-bench: its task instances as an evalsi dataset and a runnable EvalRun, and its grading.

An instance (the benchmark's JSON or JSONL: ``instance_id``, ``repo``, ``base_commit``,
``problem_statement``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS`` as lists or
JSON-encoded lists, ``version``...) becomes a row whose input is the problem statement and whose
``metadata.repository`` checks the repository out at the base commit as the task's workspace.
The tests stay out of the workspace: they are in ``metadata.swebench``, which the agent never
sees, and only the checker (``swebench_check``) applies the test patch, after the agent stopped.

Grading follows SWE-bench's reference: the tests of the files the test patch touches run once;
an instance is resolved iff every ``FAIL_TO_PASS`` and every ``PASS_TO_PASS`` test passed (a
test absent from the log has not). The repositories cannot be downloaded here: ``repos`` maps
each ``owner/name`` to a local clone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

import orjson

from evalsi.agents import current_sandbox, resolve_revision
from evalsi.connectors import InfraError
from evalsi.core import Check, Record, UserError
from evalsi.sandbox import SandboxFileError

LogFormat = Literal["pytest", "unittest"]
LOG_FORMATS: tuple[LogFormat, ...] = ("pytest", "unittest")
DEFAULT_TEST_COMMAND = ("python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider")
TEST_PATCH = ".evalsi/swebench/test.patch"
GOLD_PATCH = ".evalsi/gold.patch"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1"}
"""git in the sandbox reads no /etc/gitconfig (the confined rung refuses it: same verdicts)."""
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
DETAIL_TESTS = 5
"""Failing tests named in a check's detail; the rest are counted."""
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_PYTEST = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)")
_PASSING = {"PASSED", "XFAIL", "ok", "expected failure"}


@dataclass(frozen=True, slots=True)
class SweBenchImport:
    """What ``import_swebench`` wrote: the dataset (JSONL), the EvalRun spec, and counts."""

    dataset: Path
    spec: Path
    count: int


def read_instances(src: Path) -> list[dict[str, Any]]:
    """The instances of a SWE-bench file: a JSON array, or one object a line (JSONL)."""
    try:
        text = src.read_bytes()
    except OSError as e:
        raise UserError(f"{src}: cannot read: {e.strerror}") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith(b"["):
            rows = list(orjson.loads(stripped))
        else:
            rows = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    except orjson.JSONDecodeError as e:
        raise UserError(f"{src}: not SWE-bench JSON or JSONL: {e}") from None
    for i, row in enumerate(rows):
        where = f"{src}: instance {i + 1}"
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected an object, got {type(row).__name__}")
        missing = [k for k in REQUIRED if not isinstance(row.get(k), str) or not row[k]]
        if missing:
            raise UserError(f"{where}: missing {', '.join(missing)}")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            row[key] = _tests(row.get(key), f"{where} ({row['instance_id']}): {key}")
    ids = [r["instance_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise UserError(f"{src}: an instance_id appears twice")
    return rows


def _tests(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # the benchmark stores the lists JSON-encoded
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise UserError(f"{where}: expected a JSON list of test names") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise UserError(f"{where}: expected a list of test names")
    return value


def touched_files(test_patch: str) -> list[str]:
    """The files a test patch touches (its ``b/`` side), in order: the tests that run."""
    seen: dict[str, None] = {}
    for match in _DIFF_FILE.finditer(test_patch):
        seen.setdefault(match.group(2))
    return list(seen)


def directives(files: Sequence[str], log_format: LogFormat) -> list[str]:
    """What the test command is given: file paths for pytest, dotted modules for unittest."""
    if log_format == "pytest":
        return [f for f in files if f.endswith(".py")]
    return [f.removesuffix(".py").replace("/", ".") for f in files if f.endswith(".py")]


def parse_log(log: str, log_format: LogFormat) -> dict[str, str]:
    """Each test's status as the runner printed it (``pytest -rA`` summary lines, or
    ``unittest -v`` lines); the last word on a test wins."""
    statuses: dict[str, str] = {}
    if log_format == "pytest":
        for line in log.splitlines():
            m = _PYTEST.match(line)
            if m:
                statuses[m.group(2)] = m.group(1)
        return statuses
    for line in log.splitlines():
        head, sep, tail = line.rpartition(" ... ")
        if sep and head and not head.startswith(" "):
            statuses[head.strip()] = tail.strip()
    return statuses


def resolved(
    statuses: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> tuple[bool, str]:
    """SWE-bench's verdict: every listed test passed (``PASSED``/``XFAIL``, ``ok``); and why."""
    failed = [t for t in (*fail_to_pass, *pass_to_pass) if statuses.get(t) not in _PASSING]
    f2p = sum(statuses.get(t) in _PASSING for t in fail_to_pass)
    p2p = sum(statuses.get(t) in _PASSING for t in pass_to_pass)
    detail = (
        f"FAIL_TO_PASS {f2p}/{len(fail_to_pass)} passed, "
        f"PASS_TO_PASS {p2p}/{len(pass_to_pass)} passed"
    )
    if failed:
        named = ", ".join(failed[:DETAIL_TESTS])
        more = f" and {len(failed) - DETAIL_TESTS} more" if len(failed) > DETAIL_TESTS else ""
        detail += f"; not passing: {named}{more}"
    return not failed, detail


async def swebench_check(workspace: Path, sample: Record | None) -> Check:
    """The spec's checker: applies the sample's test patch in the task's sandbox, runs the
    tests of the files it touches and grades them as SWE-bench does."""
    if sample is None or not isinstance(sample.metadata.get("swebench"), dict):
        raise UserError("swebench_check: the sample has no metadata.swebench (import it again)")
    meta = sample.metadata["swebench"]
    log_format: LogFormat = meta.get("log_format", "pytest")
    sandbox = current_sandbox()
    try:
        await sandbox.copy_in(meta["test_patch"].encode(), TEST_PATCH)
    except (SandboxFileError, OSError) as e:
        return Check("resolved", False, f"cannot write the test patch: {e}")
    applied = await sandbox.exec(["git", "apply", "--whitespace=nowarn", TEST_PATCH], env=GIT_ENV)
    if applied.outcome.is_infra:
        return _infra(applied.outcome.detail)
    if applied.exit_code != 0:
        tail = applied.stderr[-300:].decode(errors="replace").strip()
        return Check("resolved", False, f"the test patch does not apply: {tail}")
    argv = [*meta.get("test_command", DEFAULT_TEST_COMMAND)]
    argv += directives(touched_files(meta["test_patch"]), log_format)
    result = await sandbox.exec(argv, timeout=meta.get("timeout_s"))
    if result.outcome.is_infra:
        return _infra(result.outcome.detail)
    log = (result.stdout + b"\n" + result.stderr).decode(errors="replace")
    ok, detail = resolved(parse_log(log, log_format), meta["FAIL_TO_PASS"], meta["PASS_TO_PASS"])
    if result.outcome.kind != "exit":
        detail = f"tests {result.outcome.kind}: {result.outcome.detail}; {detail}"
    return Check("resolved", ok, detail)


def _infra(detail: str) -> NoReturn:
    raise InfraError("sandbox", f"swebench_check: the sandbox failed: {detail}")


def import_swebench(
    src: Path,
    out_dir: Path,
    repos: Mapping[str, Path],
    *,
    agent_command: Sequence[str] = ("true",),
    gold: bool = False,
    test_command: Sequence[str] = DEFAULT_TEST_COMMAND,
    log_format: LogFormat = "pytest",
    min_isolation: str = "namespaced",
    test_timeout_s: float = 300.0,
    name: str = "swebench",
) -> SweBenchImport:
    """SWE-bench instances from ``src`` as ``out_dir/<name>.jsonl`` and ``out_dir/<name>.yaml``.

    ``repos`` maps each instance's ``repo`` (``owner/name``) to a local clone holding its
    ``base_commit``; a missing one, or a commit it lacks, is a ``UserError`` naming the
    instance. ``agent_command`` is the CLI agent the spec runs (``true`` by default: the
    empty patch, the baseline). ``gold`` validates the benchmark itself: each row carries its
    gold patch as a fixture and the agent applies it (every instance should resolve).

    Example::

        result = import_swebench(Path("instances.jsonl"), Path("out"), {"acme/calc": Path("calc")})
        # evalsi run -f out/swebench.yaml
    """
    if log_format not in LOG_FORMATS:
        raise UserError(f"log format: expected one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    if not agent_command or not agent_command[0].strip():
        raise UserError("agent command: expected a program and its arguments")
    instances = read_instances(src)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for inst in instances:
        where = f"{src}: {inst['instance_id']}"
        local = repos.get(inst["repo"])
        if local is None:
            raise UserError(
                f"{where}: no local clone of {inst['repo']}",
                hint=f"map it: --repo {inst['repo']}=PATH",
            )
        path = Path(local).expanduser().resolve()
        resolve_revision(path, inst["base_commit"], f"{where}: repository {inst['repo']}")
        rows.append(_row(inst, path, test_command, log_format, test_timeout_s, gold=gold))
    dataset = out_dir / f"{name}.jsonl"
    dataset.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    command = ("git", "apply", "--whitespace=nowarn", GOLD_PATCH) if gold else agent_command
    spec = out_dir / f"{name}.yaml"
    spec.write_text(_spec(name, dataset.name, command, min_isolation, test_timeout_s))
    return SweBenchImport(dataset, spec, len(rows))


def _row(
    inst: dict[str, Any],
    path: Path,
    test_command: Sequence[str],
    log_format: LogFormat,
    timeout_s: float,
    *,
    gold: bool,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "repository": {"path": str(path), "commit": inst["base_commit"]},
        "swebench": {
            "instance_id": inst["instance_id"],
            "repo": inst["repo"],
            "version": str(inst.get("version") or ""),
            "test_patch": inst["test_patch"],
            "FAIL_TO_PASS": inst["FAIL_TO_PASS"],
            "PASS_TO_PASS": inst["PASS_TO_PASS"],
            "test_command": list(test_command),
            "log_format": log_format,
            "timeout_s": timeout_s,
        },
        "category": inst["repo"],
    }
    if gold:
        metadata["fixtures"] = {"files": {GOLD_PATCH: inst.get("patch") or ""}}
    return {"id": inst["instance_id"], "input": inst["problem_statement"], "metadata": metadata}


def _spec(
    name: str, dataset: str, command: Sequence[str], min_isolation: str, timeout_s: float
) -> str:
    argv = orjson.dumps(list(command)).decode()
    return f"""\
# SWE-bench as an evalsi run: each task checks its repository out at the base commit, runs the
# CLI agent on the problem statement, then applies the hidden test patch and runs the tests
# (resolved: every FAIL_TO_PASS and PASS_TO_PASS test passes).
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: {name}}}
spec:
  target:
    agent:
      kind: cli
      cli:
        command: {argv}   # your agent: it edits the files of its working directory
        env: {{GIT_CONFIG_NOSYSTEM: "1"}}
        timeoutSeconds: 1800
  environment:
    sandbox: {{minIsolation: {min_isolation}, timeoutSeconds: {timeout_s:g}}}
    checkers:
      - python: evalsi.benchmarks:swebench_check
        name: resolved
  dataset: {{path: {dataset}}}
  evaluators:
    - ref: task-success
"""
