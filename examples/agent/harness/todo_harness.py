"""A bring-your-own harness, in Python: the smallest agent that does something checkable.

Its "agent" adds the task's input as an item of the to-do list in the workspace
(``todo.json``, seeded by the fixtures) and answers with the list's length. A real harness
would drive its own agent framework here and report each model and tool call as a step.

Run in evalsi's process (``run-python-harness.yaml``) or as a process of its own, serving the
harness protocol over gRPC (``run-process-harness.yaml`` starts ``python todo_harness.py``;
evalsi passes the socket path in ``EVALSI_HARNESS_SOCKET``). A harness in another language
serves the same service: ``proto/evalsi/harness/v1alpha1/harness.proto`` (see ``node/``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from evalsi.agents import CheckResult, Final, HarnessInfo, TaskSetup, ToolSpec
from evalsi.core import Check, Content, Step, ToolCall


class TodoHarness:
    def __init__(self) -> None:
        self.tasks: dict[str, TaskSetup] = {}

    async def describe(self) -> HarnessInfo:
        return HarnessInfo(
            "todo", "1.0", (ToolSpec("add_item", "Add a to-do item", permission="write"),)
        )

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}"
        self.tasks[session] = task
        return session

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        task = self.tasks[session]
        assert task.workspace is not None  # the spec gives the environment a sandbox
        path = task.workspace / "todo.json"
        items = json.loads(path.read_text())["items"]
        item = task.input.as_text()
        began = time.time_ns()
        items.append(item)
        path.write_text(json.dumps({"items": items}))
        yield Step(
            "tool_call",
            "add_item",
            input={"item": item},
            output={"count": len(items)},
            tool_call=ToolCall("add_item", {"item": item}),
            start_time_unix_nano=began,
            end_time_unix_nano=time.time_ns(),
        )
        yield Final(Content.of_text(f"{len(items)} items"))

    async def check(self, session: str) -> CheckResult:
        task = self.tasks[session]
        assert task.workspace is not None
        items = json.loads((task.workspace / "todo.json").read_text())["items"]
        added = task.input.as_text() in items
        return CheckResult((Check("item-added", added),), {"items": items})

    async def teardown(self, session: str) -> None:
        self.tasks.pop(session, None)


async def main() -> None:
    from evalsi.wire import serve_harness

    server = await serve_harness(TodoHarness())
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main())
