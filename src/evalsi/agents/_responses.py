"""An OpenAI Responses-compatible endpoint as the agent (``spec.target.agent.kind: responses``).

Each task is a conversation of model turns, ``POST {base_url}/responses``: the task's input as
input items, the spec's ``instructions`` and ``params``, and — when ``spec.environment.tools``
lists any — the environment's tools as ``function`` tools. The ``function_call`` items of a
reply run through the task's ``Environment`` (policy, approvals, faults and injections apply,
and it records each call as steps), and their results go back as ``function_call_output``
items, until a reply asks for no call (``final_answer``) or ``max_turns`` replies came
(``max_steps``). A server that keeps state gets only the new items with
``previous_response_id``; one that does not (``store: false``, in the params or in its reply,
or replies without ids) gets the whole conversation each turn, its own items included (reasoning
items too, so an encrypted chain of thought stays with the conversation).

What the agent did becomes the trajectory: an ``llm_call`` step per reply (its usage), then its
items in order — reasoning kept (summary and text), messages, and tools the server ran itself
(``web_search_call``, ``mcp_call``, ``code_interpreter_call``…) as ``tool_call`` steps with
their arguments and output — then the environment's steps for the calls evalsi ran. A reply
``failed`` or ``incomplete`` ends the task with that stop reason (the agent's failure, graded);
a 429, a 5xx or a dropped connection is an ``InfraError`` after the retries, and a reply that
breaks the API's shape is ``malformed_response``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._environment import bounded
from evalsi.agents._harness import CheckResult, Final, HarnessInfo, TaskSetup
from evalsi.agents._post import AgentEndpoint, egress_checked, secret
from evalsi.connectors import InfraError, Resilience, Secret, input_messages
from evalsi.core import Content, JsonValue, Message, Step, StepKind, ToolCall, Usage
from evalsi.specs import ResponsesAgentSpec

REASONING: StepKind = "reasoning"
"""The step kind of a reasoning item (its name is ``reasoning`` too)."""

MAX_ANSWER_CHARS = 1 << 20
"""An answer longer than this is cut: it is graded and stored with every task."""


@contextlib.asynccontextmanager
async def connect(
    section: ResponsesAgentSpec,
    context: ConnectorContext,
    *,
    resilience: Resilience | None = None,
) -> AsyncIterator[ResponsesHarness]:
    """The harness for a Responses endpoint (no call is made until a task runs)."""
    egress_checked(context.egress, section.base_url, f"{context.where}.baseUrl")
    key = (  # a pure replay reaches no endpoint: it needs no key
        secret(section.secret_ref, f"{context.where}.secretRef")
        if section.secret_ref and not context.replaying
        else None
    )
    yield ResponsesHarness(
        section, context, key, resilience or context.resilience or Resilience(egress=context.egress)
    )


class ResponsesHarness:
    """Runs a Responses endpoint on tasks (see the module docstring)."""

    def __init__(
        self,
        section: ResponsesAgentSpec,
        context: ConnectorContext,
        api_key: Secret | None,
        resilience: Resilience,
        *,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.section = section
        self.context = context
        self.clock = clock
        headers: dict[str, str | Secret] = {}
        if api_key is not None:
            headers["Authorization"] = Secret(f"Bearer {api_key.reveal()}", ref=api_key.ref)
        self.endpoint = AgentEndpoint(
            f"{section.base_url.rstrip('/')}/responses",
            channel="responses",
            headers=headers,
            resilience=resilience,
        )
        self._tasks: dict[str, TaskSetup] = {}
        self._names = itertools.count()

    async def describe(self) -> HarnessInfo:
        tools = tuple(self.context.environment().specs())
        return HarnessInfo(f"responses:{self.section.model}", tools=tools)

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}/{next(self._names)}"
        self._tasks[session] = task
        return session

    async def check(self, session: str) -> CheckResult:
        return CheckResult()

    async def teardown(self, session: str) -> None:
        self._tasks.pop(session, None)

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        task = self._tasks[session]
        s = self.section
        environment = self.context.environment()
        tools = [_function_tool(spec.to_openai()) for spec in environment.specs()]
        history: list[JsonValue] = input_items(task.input)
        pending: list[JsonValue] = list(history)
        previous: str | None = None
        total = Usage(input_tokens=0, output_tokens=0)
        answer = ""
        for _ in range(s.max_turns):
            body: dict[str, Any] = {**s.params, "model": s.model}
            if s.instructions:
                body["instructions"] = s.instructions
            if tools:
                body["tools"] = tools
            if previous is not None:
                body["previous_response_id"] = previous
                body["input"] = pending
            else:
                body["input"] = history
            began = self.clock()
            reply = await self.endpoint.send(body)
            turn = read_reply(reply, self.endpoint.url)
            _add(total, turn.usage)
            answer = turn.text or answer
            calls = [
                ToolCall(c["name"], _arguments(c.get("arguments")), c["call_id"])
                for c in turn.calls
            ]
            yield Step(
                "llm_call",
                turn.model or s.model,
                output={
                    "text": _cut(turn.text),
                    "tool_calls": [c.name for c in calls],
                    "status": turn.status,
                    **({"reason": turn.reason} if turn.reason else {}),
                },
                usage=turn.usage,
                start_time_unix_nano=began,
                end_time_unix_nano=self.clock(),
            )
            for step in turn.steps:
                yield step
            if turn.status in ("failed", "incomplete", "cancelled"):
                yield Final(Content.of_text(_cut(answer)), _final(total), turn.stop_reason)
                return
            if not calls:
                yield Final(Content.of_text(_cut(answer)), _final(total), "final_answer")
                return
            results = await asyncio.gather(*(environment.call(c) for c in calls))
            outputs: list[JsonValue] = []
            for call, result in zip(calls, results, strict=True):
                for step in result.steps:
                    yield step
                outputs.append(
                    {
                        "type": "function_call_output",
                        "call_id": call.id,
                        "output": result.for_model(),
                    }
                )
            history.extend(turn.items)
            history.extend(outputs)
            stateful = turn.id and turn.stored and s.params.get("store", True) is not False
            previous, pending = (turn.id, outputs) if stateful else (None, [])
        yield Final(Content.of_text(_cut(answer)), _final(total), "max_steps")


class Turn:
    """One reply, read: its items (as sent back), the steps they make, the calls for evalsi."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.status = "completed"
        self.stop_reason = "final_answer"
        self.stored = True
        self.usage = Usage()
        self.items: list[JsonValue] = []
        self.steps: list[Step] = []
        self.calls: list[dict[str, Any]] = []
        self.text = ""
        self.reason = ""  # why a failed or incomplete reply stopped, as the server said


def read_reply(reply: JsonValue, url: str) -> Turn:
    """A Responses reply as a ``Turn``; ``InfraError(malformed_response)`` when it is not one."""
    if not isinstance(reply, dict):
        raise _malformed(url, f"a response object (got {type(reply).__name__})")
    output = reply.get("output")
    if not isinstance(output, list):
        raise _malformed(url, "an output list")
    turn = Turn()
    turn.id = reply["id"] if isinstance(reply.get("id"), str) else ""
    turn.model = reply["model"] if isinstance(reply.get("model"), str) else ""
    turn.stored = reply.get("store") is not False
    status = reply.get("status")
    turn.status = status if isinstance(status, str) and status else "completed"
    if turn.status in ("failed", "incomplete", "cancelled"):
        turn.stop_reason = turn.status
        turn.reason = _why(turn.status, reply)
    usage = reply.get("usage")
    if isinstance(usage, dict):
        turn.usage = Usage(
            input_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
        )
    texts: list[str] = []
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise _malformed(url, f"a typed item at output[{i}]")
        turn.items.append(item)
        kind = item["type"]
        if kind == "function_call":
            if not isinstance(item.get("name"), str) or not isinstance(item.get("call_id"), str):
                raise _malformed(url, f"a name and a call_id in output[{i}] (function_call)")
            turn.calls.append(item)
        elif kind == "message":
            text = _message_text(item)
            texts.append(text)
            turn.steps.append(
                Step("message", str(item.get("role", "assistant")), output=bounded(text))
            )
        elif kind == "reasoning":
            turn.steps.append(_reasoning(item))
        elif kind.endswith("_call"):
            turn.steps.append(_server_tool(item))
        else:  # mcp_list_tools, approval requests, kinds newer than this code: kept as they are
            turn.steps.append(Step("other", kind, output=bounded(item)))
    turn.text = "".join(texts)
    return turn


def input_items(content: Content) -> list[JsonValue]:
    """The task's input as Responses input items: text as one user message; chat messages
    mapped (an assistant's tool calls as ``function_call`` items, tool results as
    ``function_call_output``)."""
    items: list[JsonValue] = []
    for m in input_messages(content):
        items.extend(_message_items(m))
    return items


def _message_items(m: Message) -> list[JsonValue]:
    if m.role == "tool":
        return [
            {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content or ""}
        ]
    out: list[JsonValue] = []
    if m.content is not None or not m.tool_calls:
        out.append({"role": m.role, "content": m.content or ""})
    for call in m.tool_calls:
        arguments = (
            call.arguments
            if isinstance(call.arguments, str)
            else orjson.dumps(call.arguments).decode()
        )
        out.append(
            {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}
        )
    return out


def _function_tool(openai: dict[str, Any]) -> JsonValue:
    fn = openai["function"]
    return {
        "type": "function",
        "name": fn["name"],
        "description": fn.get("description", ""),
        "parameters": fn.get("parameters", {"type": "object", "properties": {}}),
    }


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
            parts.append(part["refusal"])
    return "".join(parts)


def _texts(parts: Any) -> list[str]:
    return (
        [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if isinstance(parts, list)
        else []
    )


def _reasoning(item: dict[str, Any]) -> Step:
    output: dict[str, JsonValue] = {"summary": _texts(item.get("summary"))}
    content = _texts(item.get("content"))
    if content:
        output["content"] = content
    if item.get("encrypted_content"):
        output["encrypted"] = True  # kept in the conversation, not in the trajectory
    return Step(REASONING, "reasoning", output=bounded(output))


_ARGUMENT_FIELDS = ("arguments", "action", "input", "code", "queries", "call")
_OUTPUT_FIELDS = ("output", "results", "result", "outputs")


def _server_tool(item: dict[str, Any]) -> Step:
    """A tool the server ran itself: a ``tool_call`` step with what it was asked and gave."""
    kind = item["type"]
    name = item.get("name") if isinstance(item.get("name"), str) else kind.removesuffix("_call")
    arguments: JsonValue = None
    for key in _ARGUMENT_FIELDS:
        if item.get(key) is not None:
            arguments = _arguments(item[key]) if key == "arguments" else item[key]
            break
    result: JsonValue = None
    for key in _OUTPUT_FIELDS:
        if item.get(key) is not None:
            result = item[key]
            break
    error = item.get("error")
    return Step(
        "tool_call",
        str(name),
        input={"executed_by": "server", "type": kind, "status": item.get("status")},
        output=bounded(result),
        tool_call=ToolCall(
            str(name), bounded(arguments), str(item.get("call_id") or item.get("id") or "")
        ),
        error=str(error)[:2000] if error else "",
    )


def _arguments(value: Any) -> JsonValue:
    """A call's arguments: the JSON its string holds; a string that is not JSON stays itself
    (the environment refuses it as not an object: that is the agent's error, and evidence)."""
    if isinstance(value, str):
        try:
            decoded: JsonValue = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return decoded
    return value


def _why(status: str, reply: dict[str, Any]) -> str:
    details = reply.get("incomplete_details") if status == "incomplete" else reply.get("error")
    if not isinstance(details, dict):
        return ""
    parts = [details.get(k) for k in ("reason", "code", "message")]
    return ": ".join(p for p in parts if isinstance(p, str) and p)[:2000]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _add(total: Usage, usage: Usage) -> None:
    total.input_tokens = (total.input_tokens or 0) + (usage.input_tokens or 0)
    total.output_tokens = (total.output_tokens or 0) + (usage.output_tokens or 0)


def _final(total: Usage) -> Usage:
    return Usage(
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        total_tokens=total.tokens(),
    )


def _cut(text: str) -> str:
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    return (
        f"{text[:MAX_ANSWER_CHARS]}\n[... cut by evalsi: the answer was {len(text):,} characters]"
    )


def _malformed(url: str, what: str) -> InfraError:
    return InfraError("malformed_response", f"{url} answered without {what}", endpoint=url)


__all__ = ["ResponsesHarness", "connect", "input_items", "read_reply"]
