"""A scripted Agent2Agent server (``a2a-sdk``) for tests: what it does depends on the words of
the user's message, so one server plays every case.

| the message starts with | the agent |
|---|---|
| ``echo X`` | answers with one message ``X`` (no task) |
| ``stream X`` | works on a task: three status updates, an artifact in two chunks, completed |
| ``fail`` | starts working, then fails the task with a message |
| ``reject`` | rejects the task |
| ``ask`` | asks for input (``input-required``); the follow-up message completes it |
| ``huge N`` | an artifact of N characters |
| ``crash`` | raises (the SDK turns it into a failed task or an error) |
| anything else | completes the task with an artifact holding the text upper-cased |

    python -m tests.support.a2a_agent --port 18765 [--no-streaming]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from a2a.helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette


class ScriptedAgent(AgentExecutor):
    """Plays the table above."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        word, _, rest = text.partition(" ")
        task_id, context_id = context.task_id or "", context.context_id or ""
        if word == "echo":
            await event_queue.enqueue_event(new_text_message(rest, context_id=context_id))
            return
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"booked for {text}")], name="booking")
            await updater.complete()
            return
        await updater.start_work(updater.new_agent_message([new_text_part("thinking")]))
        if word == "stream":
            for i in range(1, 3):
                await updater.start_work(updater.new_agent_message([new_text_part(f"step {i}")]))
            await updater.add_artifact(
                [new_text_part(rest[: len(rest) // 2])], artifact_id="a1", name="answer"
            )
            await updater.add_artifact(
                [new_text_part(rest[len(rest) // 2 :])],
                artifact_id="a1",
                name="answer",
                append=True,
                last_chunk=True,
            )
            await updater.complete()
        elif word == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("cannot do that")]))
        elif word == "reject":
            await updater.reject(updater.new_agent_message([new_text_part("not my job")]))
        elif word == "ask":
            await updater.requires_input(updater.new_agent_message([new_text_part("which date?")]))
        elif word == "huge":
            await updater.add_artifact([new_text_part("x" * int(rest))], name="huge")
            await updater.complete()
        elif word == "crash":
            raise RuntimeError("the agent crashed")
        else:
            await updater.add_artifact([new_text_part(text.upper())], name="answer")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(url: str, *, streaming: bool = True) -> AgentCard:
    return AgentCard(
        name="scripted",
        description="A scripted test agent",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="script", name="script", description="plays a script", tags=["test"])
        ],
    )


def build_app(url: str, *, streaming: bool = True, executor: Any = None) -> Starlette:
    """The agent's Starlette app, its card naming ``url`` as its JSON-RPC endpoint."""
    agent_card = card(url, streaming=streaming)
    handler = DefaultRequestHandler(
        agent_executor=executor or ScriptedAgent(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    url = f"http://127.0.0.1:{args.port}/"
    config = Config()
    config.bind = [f"127.0.0.1:{args.port}"]
    config.accesslog = None
    print(f"A2A agent at {url}", flush=True)
    asyncio.run(serve(build_app(url, streaming=not args.no_streaming), config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
