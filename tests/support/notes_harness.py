"""A small harness for tests: its 'agent' files the task's input as a note in the workspace and
answers with it upper-cased; ``check`` verifies the note, and the end state lists the notes.

Run in process (``harness: {python: tests.support.notes_harness:NotesHarness}``) or as a process
serving the protocol (``python tests/support/notes_harness.py [--listen ADDR]``; without
``--listen`` it serves on ``EVALSI_HARNESS_SOCKET``, as a spec's ``harness: {command}`` starts
it). Inputs that start with a keyword misbehave on purpose: ``crash`` raises in run, ``mute``
ends run without a final answer, ``slow`` sleeps 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from evalsi.agents import CheckResult, Final, HarnessInfo, TaskSetup, ToolSpec
from evalsi.core import Check, Content, Step, ToolCall, Usage


class NotesHarness:
    def __init__(self) -> None:
        self.tasks: dict[str, TaskSetup] = {}
        self.torn_down: list[str] = []
        self._n = itertools.count()

    async def describe(self) -> HarnessInfo:
        return HarnessInfo(
            "notes", "1.0", (ToolSpec("file_note", "File a note", permission="write"),)
        )

    async def setup(self, task: TaskSetup) -> str:
        session = f"s{next(self._n)}"
        self.tasks[session] = task
        return session

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        task = self.tasks[session]
        text = task.input.as_text()
        if text.startswith("crash"):
            raise RuntimeError("the notes harness crashed")
        if text.startswith("slow"):
            await asyncio.sleep(30)
        began = time.time_ns()
        if task.workspace is not None:
            (task.workspace / "notes").mkdir(exist_ok=True)
            (task.workspace / "notes" / f"{task.task_id}.txt").write_text(text)
        yield Step(
            "tool_call",
            "file_note",
            input={"text": text},
            output={"filed": task.workspace is not None},
            tool_call=ToolCall("file_note", {"text": text}),
            start_time_unix_nano=began,
            end_time_unix_nano=time.time_ns(),
        )
        if text.startswith("mute"):
            return
        prefix = task.fixtures.get("prefix.txt", "")
        yield Final(
            Content.of_text(f"{prefix}{text.upper()}"),
            Usage(input_tokens=len(text), output_tokens=len(text)),
        )

    async def check(self, session: str) -> CheckResult:
        task = self.tasks[session]
        if task.workspace is None:
            return CheckResult((Check("note-filed", False, "no workspace"),), {"notes": []})
        notes = sorted(p.name for p in (task.workspace / "notes").glob("*.txt"))
        filed = f"{task.task_id}.txt" in notes
        return CheckResult((Check("note-filed", filed, ", ".join(notes)),), {"notes": notes})

    async def teardown(self, session: str) -> None:
        self.tasks.pop(session, None)
        self.torn_down.append(session)


def read_note(workspace: Path, sample: object) -> tuple[bool, str]:
    """A Python checker: the note of the sample is in the workspace."""
    notes = list((workspace / "notes").glob("*.txt"))
    return bool(notes), f"{len(notes)} note(s)"


async def _serve(address: str | None) -> None:
    from evalsi.wire import serve_harness

    server = await serve_harness(NotesHarness(), address)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default=None)
    parser.add_argument("--fail", action="store_true", help="exit at once, saying why")
    args = parser.parse_args()
    if args.fail:
        print("notes harness: refusing to start (--fail)", file=sys.stderr)
        sys.exit(4)
    asyncio.run(_serve(args.listen))
