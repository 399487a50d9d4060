"""Write ``stub-script.json``: the known-good trajectories as a script for the stub LLM server
(``tests/support/stub_llm_server.py``), so ``run-stub.yaml`` drives the built-in agent over real
HTTP to the same end states.

The stub answers from the last user or tool message's text alone. So this plays every scenario's
known-good trajectory through the real environment (``run-scripted-good.yaml``, one trial, in a
throwaway store), reads what each call returned as the model saw it, and maps that text to the
next call (or to the final answer). Two scenarios that see the same text and must go on
differently cannot share one script: that is reported, and the script is not written. Run it
from the repository root after changing a scenario, a case or a tool:

    PYTHONPATH=examples/agent/helpdesk python examples/agent/helpdesk/make_stub_script.py
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

import evalsi
from evalsi.datasets import read_trajectory
from evalsi.specs import load_run_spec
from evalsi.store import SqlStore

HERE = Path(__file__).resolve().parent


def seen(steps: list[Any]) -> list[str]:
    """What each call returned, as the tool message's text the model got."""
    texts = []
    for step in steps:
        if step.kind == "tool_call":
            if step.error:
                texts.append(f"error: {step.error}")
            elif isinstance(step.output, str):
                texts.append(step.output)
            else:
                texts.append(orjson.dumps(step.output).decode())  # as the harness sends it
        elif step.kind == "policy_block":
            texts.append(f"error: blocked by policy: {step.output['reason']}")
        elif step.kind == "approval" and step.output["decision"] == "denied":
            texts.append(f"error: {step.name} needs an approval, and it was denied")
    return texts


def main() -> int:
    spec = dataclasses.replace(load_run_spec(HERE / "run-scripted-good.yaml"), trials=1, gates=())
    scenarios = {}
    with (HERE / "scenarios.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            scenarios[row["id"]] = row
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore.open(Path(tmp) / "s.db")
        result = evalsi.run(spec, store=store, execute_only=True)
        rows = {r.record_id: r for r in store.iter_outputs(result.run_id)}
    tool_calls: dict[str, list[dict[str, Any]]] = {}
    answers: dict[str, str] = {}
    wants: dict[str, str] = {}  # text -> the scenario that first needed it
    clashes = []
    for sid, row in scenarios.items():
        known = read_trajectory(row["metadata"]["known"]["good"])
        calls = [s.tool_call for s in known.steps if s.tool_call is not None]
        answer = next(s.output for s in reversed(known.steps) if s.kind == "message")
        played = read_trajectory(json.loads(rows[sid].trajectory or "{}"), stored=True)
        texts = [row["input"], *seen(played.steps)]
        if len(texts) != len(calls) + 1:
            clashes.append(f"{sid}: {len(calls)} calls, but {len(texts) - 1} results recorded")
            continue
        for i, text in enumerate(texts):
            if i < len(calls):
                action: Any = [{"name": calls[i].name, "arguments": calls[i].arguments}]
                table: dict[str, Any] = tool_calls
            else:
                action, table = answer, answers
            other = tool_calls.get(text, answers.get(text))
            if text in wants and other != action:
                clashes.append(f"{sid} and {wants[text]} both see {text[:80]!r}")
                continue
            wants[text] = sid
            table[text] = action
    if clashes:
        print("cannot script the stub:\n  " + "\n  ".join(clashes), file=sys.stderr)
        return 1
    script = {"tool_calls": tool_calls, "answers": answers}
    (HERE / "stub-script.json").write_text(json.dumps(script, indent=1, ensure_ascii=False) + "\n")
    print(f"stub-script.json: {len(tool_calls)} tool-call turns, {len(answers)} answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
