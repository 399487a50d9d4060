"""τ-bench / τ²-bench domains as agent runs: a policy, tools over a JSON database, tasks with a
simulated user, graded on the database the agent leaves.

A domain directory holds what a τ² domain holds: ``policy.md`` (the agent's rules, sent as its
system prompt), ``db.json`` (the database), ``tasks.json`` (τ²'s task list: per task a
``user_scenario`` with ``persona`` and ``instructions`` {``reason_for_call``,
``known_info``, ``unknown_info``, ``task_instructions``}, and ``evaluation_criteria.actions``,
the tool calls a correct agent makes) and a Python module of the domain's tools, each a
function whose keyword arguments are the tool's and which reads and writes the database with
``tau_database()``.

``tau_rows`` turns the tasks into dataset rows: the input is the reason for the call (the
scenario), ``metadata.user`` plays the user (``goal`` from the reason and the instructions,
``hidden`` from what the user knows and does not), the database is the task's fixture
(``db.json`` in its workspace), and ``metadata.known`` holds a ``gold`` trajectory (the
expected actions) and an ``empty`` one, for the scripted model. ``tau_run_spec`` writes the
EvalRun beside them.

Grading is τ²'s database check: the expected actions are replayed with the same tools on a
fresh copy of the initial database, and the hash of the result must equal the hash of the
database the agent left (``tau_check``, a ``python`` checker whose verdict ``task-success``
reads). Like τ²'s, it sees only what changed the database: a task whose expected actions
only read is passed by an agent that does nothing, and what the agent told the user
(τ²'s ``communicate_info`` and ``nl_assertions``) is kept in ``metadata.tau`` for other
evaluators, not judged here. τ²'s ``initial_state.initialization_actions`` are not replayed.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from evalsi.agents import workspace
from evalsi.connectors import load_callable
from evalsi.core import Record, UserError, content_hash

DB_FILE = "db.json"

_replaying: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "evalsi_tau_replay", default=None
)


@contextlib.contextmanager
def tau_database() -> Iterator[dict[str, Any]]:
    """The domain's database for one tool call: the task's ``db.json``, written back when the
    call returns (not when it raises, so a failed call changes nothing); while the checker
    replays the expected actions, the copy it replays on."""
    replay = _replaying.get()
    if replay is not None:
        yield replay
        return
    path = workspace() / DB_FILE
    data = orjson.loads(path.read_bytes())
    yield data
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))


def replay_actions(
    tools: str, actions: list[Mapping[str, Any]], initial: Mapping[str, Any]
) -> dict[str, Any]:
    """``initial`` after the ``actions`` (``{name, arguments}``) ran with the ``tools``
    module's functions; an action that raises changes nothing, as for the agent."""
    db = copy.deepcopy(dict(initial))
    token = _replaying.set(db)
    try:
        for action in actions:
            fn = load_callable(f"{tools}:{action['name']}")
            with contextlib.suppress(Exception):
                fn(**dict(action.get("arguments") or {}))
    finally:
        _replaying.reset(token)
    return db


def tau_check(root: Path, sample: Record) -> tuple[bool, str]:
    """The database check: the workspace's ``db.json`` equals the initial one after the
    sample's expected actions (``metadata.tau.actions``), replayed with its tools."""
    tau = sample.metadata.get("tau")
    files = (sample.metadata.get("fixtures") or {}).get("files") or {}
    if not isinstance(tau, Mapping) or DB_FILE not in files:
        raise UserError(
            f"sample {sample.id!r}: the τ database check needs metadata.tau and a "
            f"fixtures.files[{DB_FILE!r}] (rows made by evalsi.benchmarks.tau_rows)"
        )
    expected = replay_actions(str(tau["tools"]), list(tau.get("actions") or []), files[DB_FILE])
    path = root / DB_FILE
    try:
        got = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        return False, f"{DB_FILE}: cannot read the agent's database: {e}"
    if content_hash(got) == content_hash(expected):
        return (
            True,
            f"the database matches the expected one ({len(tau.get('actions') or [])} actions)",
        )
    return False, "the database differs from the expected one at " + ", ".join(
        _differences(got, expected)[:5]
    )


def _differences(got: Any, want: Any, at: str = "$") -> list[str]:
    if isinstance(got, dict) and isinstance(want, dict):
        out: list[str] = []
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                out.append(f"{at}.{key}")
            else:
                out.extend(_differences(got[key], want[key], f"{at}.{key}"))
        return out
    return [] if content_hash(got) == content_hash(want) else [at]


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def tau_rows(domain: Path, tools: str) -> list[dict[str, Any]]:
    """Dataset rows for the tasks of the τ² domain in ``domain``, whose tools are the
    functions of the module ``tools``."""
    try:
        tasks = json.loads((domain / "tasks.json").read_text())
        db = json.loads((domain / DB_FILE).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{domain}: not a τ² domain (tasks.json and db.json): {e}") from None
    if not isinstance(tasks, list):
        raise UserError(f"{domain / 'tasks.json'}: expected a list of tasks")
    rows = []
    for i, task in enumerate(tasks):
        where = f"{domain / 'tasks.json'}: task {i}"
        try:
            scenario = task["user_scenario"]
            instructions = scenario["instructions"]
            criteria = task.get("evaluation_criteria") or {}
            actions = [
                {"name": a["name"], "arguments": dict(a.get("arguments") or {})}
                for a in criteria.get("actions") or []
            ]
        except (KeyError, TypeError) as e:
            raise UserError(f"{where}: missing {e}") from None
        if isinstance(instructions, str):
            instructions = {"task_instructions": instructions}
        reason = _text(instructions.get("reason_for_call"))
        goal = "\n\n".join(t for t in (reason, _text(instructions.get("task_instructions"))) if t)
        known, unknown = (
            _text(instructions.get("known_info")),
            _text(instructions.get("unknown_info")),
        )
        hidden = "\n\n".join(t for t in (known, unknown and f"You do not know: {unknown}") if t)
        gold = [{"kind": "tool_call", "tool_call": a} for a in actions]
        gold.append({"kind": "message", "name": "assistant", "output": "Done."})
        rows.append(
            {
                "id": str(task.get("id", i)),
                "input": reason or _text(instructions.get("task_instructions")),
                "metadata": {
                    "user": {
                        "persona": _text(scenario.get("persona")),
                        "goal": goal,
                        "hidden": hidden,
                    },
                    "tau": {
                        "tools": tools,
                        "actions": actions,
                        "communicate_info": list(criteria.get("communicate_info") or []),
                        "nl_assertions": list(criteria.get("nl_assertions") or []),
                        "reward_basis": list(criteria.get("reward_basis") or []),
                    },
                    "fixtures": {"files": {DB_FILE: db}},
                    "known": {"gold": {"steps": gold}, "empty": {"steps": []}},
                },
            }
        )
    return rows


def tau_run_spec(
    domain: Path,
    tools: str,
    out: Path,
    *,
    agent: Mapping[str, Any],
    user: Mapping[str, Any],
    tool_names: list[str],
    writes: frozenset[str] = frozenset(),
    name: str = "",
) -> Path:
    """Write ``tasks.jsonl`` and ``run.yaml`` (an EvalRun of the domain) into ``out``:
    ``agent`` and ``user`` are the ``model:`` mappings of the agent and the simulated user;
    the tools named in ``writes`` are declared as writing the database."""
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    rows = tau_rows(domain, tools)
    (out / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        policy = (domain / "policy.md").read_text()
    except OSError as e:
        raise UserError(f"{domain}: no policy.md: {e}") from None
    spec = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name or f"tau-{domain.name}"},
        "spec": {
            "target": {
                "system": policy,
                "agent": {"model": dict(agent), "maxSteps": 30, "user": {"model": dict(user)}},
            },
            "environment": {
                "tools": [
                    {
                        "function": f"{tools}:{t}",
                        "declare": {"permission": "write" if t in writes else "read"},
                    }
                    for t in tool_names
                ],
                "sandbox": {"minIsolation": "none"},
                "checkers": [{"python": "evalsi.benchmarks:tau_check", "name": "database"}],
            },
            "dataset": {"path": "tasks.jsonl"},
            "evaluators": [{"ref": "task-success"}],
        },
    }

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None  # the policy stays readable in the spec
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    path = out / "run.yaml"
    path.write_text(yaml.dump(spec, Dumper=Dumper, sort_keys=False, allow_unicode=True))
    return path
