"""A small Agent2Agent server (a2a-sdk) to evaluate: it answers "what is the capital of X?"
for a few countries, streaming a status update, then the answer as an artifact. For anything
else it asks which country is meant (input-required).

    python examples/agents-a2a/a2a_agent.py --port 18765
"""

from __future__ import annotations

import argparse
import asyncio

from a2a.helpers import new_text_part
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
from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.applications import Starlette

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}


class Capitals(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        question = context.get_user_input().strip().lower().rstrip("?")
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
        )
        task = TaskUpdater(event_queue, task_id, context_id)
        await task.start_work(task.new_agent_message([new_text_part("looking it up")]))
        country = question.rsplit(" ", 1)[-1]
        if country not in CAPITALS:
            await task.requires_input(task.new_agent_message([new_text_part("which country?")]))
            return
        await task.add_artifact([new_text_part(CAPITALS[country])], name="answer")
        await task.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=18765)
    port = parser.parse_args().port
    card = AgentCard(
        name="capitals",
        description="Knows the capitals of a few countries",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="capitals", name="capitals", description="capital cities", tags=[])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Capitals(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    asyncio.run(serve(app, config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
