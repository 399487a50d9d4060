"""Any agent behind an HTTP API (``spec.target.agent.kind: http``).

Each turn renders the section's ``body`` — a Jinja2 template (sandboxed, undefined names are
errors) over ``input`` (the task's input as plain data), ``messages`` (the conversation so far,
as ``{role, content}`` objects), ``metadata`` (the sample's) and ``session`` (the id the agent
gave last turn, ``None`` at first) — to JSON, sends it (``method``, ``headers`` with their
``env:``/``file:`` values read), and reads the reply with JSONPaths: ``output`` the answer,
``transcript`` what the agent did (a list of chat messages, or of steps), ``session`` the id to
send back next turn. Without ``body`` the request is ``{"input", "messages", "session"}``.

A transcript's tool calls become ``tool_call`` steps with their arguments and, matched by call
id, their results — so the agent pack grades them — and its assistant texts ``message`` steps.
The agent ran those tools itself: evalsi records what it reports, and says so in each step
(``executed_by: agent``). A template that does not parse stops the run before any task; one
that fails or renders something that is not JSON for a sample, a path that matches nothing,
or a transcript that is not one, is a ``TargetError`` on that task; a reply that is not JSON,
a 429, a 5xx or a dropped connection is an ``InfraError`` after the retries.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._environment import bounded
from evalsi.agents._harness import CheckResult, Final, HarnessInfo, TaskSetup
from evalsi.agents._post import AgentEndpoint, egress_checked, excerpt, header_values
from evalsi.connectors import JsonPath, JsonPathMiss, Resilience, TargetError, plain_input
from evalsi.core import (
    Content,
    JsonValue,
    Message,
    Step,
    ToolCall,
    UserError,
    message_from_dict,
)
from evalsi.datasets import read_trajectory
from evalsi.specs import HttpAgentSpec

DEFAULT_BODY = (
    '{"input": {{ input | tojson }}, "messages": {{ messages | tojson }}, '
    '"session": {{ session | tojson }}}'
)
MAX_TRANSCRIPT = 10_000
"""Transcript entries one reply may hold; more is refused (a loop, or hostile)."""
STEP_TYPES = {"model_call": "llm_call"}


@dataclass(slots=True)
class _Conversation:
    task: TaskSetup
    messages: list[JsonValue] = field(default_factory=list)
    session: JsonValue = None


@contextlib.asynccontextmanager
async def connect(
    section: HttpAgentSpec,
    context: ConnectorContext,
    *,
    resilience: Resilience | None = None,
) -> AsyncIterator[HttpAgentHarness]:
    """The harness for an HTTP agent; the template and paths are checked here, before any
    task, and nothing is sent yet."""
    yield HttpAgentHarness(
        section, context, resilience or context.resilience or Resilience(egress=context.egress)
    )


class HttpAgentHarness:
    """Runs an HTTP agent on tasks (see the module docstring)."""

    def __init__(
        self, section: HttpAgentSpec, context: ConnectorContext, resilience: Resilience
    ) -> None:
        where = context.where
        self.where = where
        method = section.method.upper()
        if method not in ("POST", "PUT"):
            raise UserError(f"{where}.method: expected POST or PUT, got {section.method!r}")
        egress_checked(context.egress, section.url, f"{where}.url")
        self.template = _template(section.body or DEFAULT_BODY, f"{where}.body")
        self.paths = {
            name: _path(text, f"{where}.{name}")
            for name, text in (
                ("output", section.output),
                ("transcript", section.transcript),
                ("session", section.session),
            )
            if text
        }
        if "output" not in self.paths and "transcript" not in self.paths:
            raise UserError(f"{where}: set output (a JSONPath to the answer), transcript, or both")
        self.endpoint = AgentEndpoint(
            section.url,
            channel="http",
            method=method,
            headers=header_values(section.headers, f"{where}.headers", replaying=context.replaying),
            resilience=resilience,
        )
        self.section = section
        self._conversations: dict[str, _Conversation] = {}
        self._names = itertools.count()

    async def describe(self) -> HarnessInfo:
        return HarnessInfo(f"http:{self.endpoint.url}")

    async def setup(self, task: TaskSetup) -> str:
        name = f"{task.task_id}/{task.trial}/{next(self._names)}"
        value = plain_input(task.input)
        messages: list[JsonValue] = (
            list(value) if isinstance(value, list) and task.input.kind == "messages" else []
        )
        if not messages:
            messages = [{"role": "user", "content": task.input.as_text()}]
        self._conversations[name] = _Conversation(task, messages)
        return name

    async def check(self, session: str) -> CheckResult:
        return CheckResult()

    async def teardown(self, session: str) -> None:
        self._conversations.pop(session, None)

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        steps, answer = await self.turn(session)
        for step in steps:
            yield step
        yield Final(answer)

    async def turn(self, session: str, user: str | None = None) -> tuple[list[Step], Content]:
        """One turn of the conversation ``session``: ``user`` (a later user message, for a
        multi-turn task) is added to it first. The agent's answer joins the conversation."""
        c = self._conversations[session]
        if user is not None:
            c.messages.append({"role": "user", "content": user})
        variables = {
            "input": plain_input(c.task.input),
            "messages": c.messages,
            "metadata": dict(c.task.metadata),
            "session": c.session,
        }
        body = self._render(variables)
        reply = await self.endpoint.send(body)
        steps: list[Step] = []
        if "transcript" in self.paths:
            entries = self._find("transcript", reply)
            steps = transcript_steps(entries, f"{self.where}.transcript")
        answer = self._find("output", reply) if "output" in self.paths else _last_answer(steps)
        if "session" in self.paths:
            c.session = self._find("session", reply)
        text = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
        c.messages.append({"role": "assistant", "content": text})
        content = Content.of_text(answer) if isinstance(answer, str) else Content.of_json(answer)
        return steps, content

    def _render(self, variables: dict[str, Any]) -> JsonValue:
        from jinja2 import TemplateError

        try:
            text = self.template.render(**variables)
        except TemplateError as e:
            raise TargetError(
                f"{self.where}.body: the template failed on this sample: {e}"
            ) from None
        try:
            body: JsonValue = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise TargetError(
                f"{self.where}.body: the template rendered text that is not JSON for this "
                f"sample: {excerpt(text)!r}",
                hint="render values with the tojson filter: {{ input | tojson }}",
            ) from None
        return body

    def _find(self, name: str, reply: JsonValue) -> JsonValue:
        path = self.paths[name]
        try:
            return path.find(reply)
        except JsonPathMiss as e:
            raise TargetError(
                f"{self.where}.{name}: {path} does not match the agent's reply: {e}",
                hint=f"the reply began: {excerpt(reply)}",
            ) from None


def transcript_steps(entries: JsonValue, where: str) -> list[Step]:
    """What the agent reported it did, as steps: chat messages (an assistant's tool calls
    matched with the ``tool`` messages that answer them), or steps (evalsi's trajectory form,
    or the ``type``/``tool``/``arguments``/``result`` form ``runs show --tasks`` prints)."""
    if not isinstance(entries, list):
        raise TargetError(f"{where}: expected a list of messages or steps, got {excerpt(entries)}")
    if len(entries) > MAX_TRANSCRIPT:
        raise TargetError(f"{where}: {len(entries):,} entries, more than {MAX_TRANSCRIPT:,}")
    messages: list[tuple[int, Message]] = []
    steps: list[Step] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TargetError(f"{where}[{i}]: expected an object, got {excerpt(entry)}")
        if "role" in entry:
            try:
                messages.append((len(steps), message_from_dict(entry)))
            except (KeyError, TypeError, AttributeError) as e:
                raise TargetError(f"{where}[{i}]: not a chat message: {e}") from None
            steps.append(Step("other"))  # a placeholder where the message's steps go
        else:
            steps.append(_step(entry, f"{where}[{i}]"))
    if not messages:
        return steps
    return _with_messages(steps, messages)


def _with_messages(steps: list[Step], messages: list[tuple[int, Message]]) -> list[Step]:
    results = {m.tool_call_id: m for _, m in messages if m.role == "tool" and m.tool_call_id}
    used: set[str] = set()
    expanded: dict[int, list[Step]] = {}
    for at, m in messages:
        out: list[Step] = []
        if m.role == "assistant":
            if m.content:
                out.append(Step("message", "assistant", output=bounded(m.content)))
            for call in m.tool_calls:
                result = results.get(call.id) if call.id else None
                if result is not None:
                    used.add(call.id)
                out.append(
                    Step(
                        "tool_call",
                        call.name,
                        input={"executed_by": "agent"},
                        output=bounded(_result(result.content)) if result is not None else None,
                        tool_call=ToolCall(call.name, bounded(call.arguments), call.id),
                    )
                )
        elif m.role == "tool" and m.tool_call_id in used:
            pass  # already the result of its call
        elif m.role == "tool":
            out.append(Step("message", "tool", output=bounded(m.content)))
        expanded[at] = out
    merged: list[Step] = []
    for i, step in enumerate(steps):
        merged.extend(expanded.get(i, [step]))
    return merged


def _step(entry: dict[str, Any], where: str) -> Step:
    if "kind" in entry:  # evalsi's own trajectory form
        try:
            return read_trajectory([entry], where).steps[0]
        except ValueError as e:
            raise TargetError(f"{where}: {e}") from None
    kind = entry.get("type")
    if not isinstance(kind, str):
        raise TargetError(f"{where}: expected a message (role) or a step (kind or type)")
    kind = STEP_TYPES.get(kind, kind)
    if kind == "tool_call":
        name = str(entry.get("tool") or entry.get("name") or "")
        return Step(
            "tool_call",
            name,
            input={"executed_by": "agent"},
            output=bounded(entry.get("result")),
            tool_call=ToolCall(name, bounded(entry.get("arguments")), str(entry.get("id", ""))),
            error=str(entry.get("error") or "")[:2000],
        )
    try:
        plain = {k: v for k, v in entry.items() if k != "type"}
        return read_trajectory([{**plain, "kind": kind}], where).steps[0]
    except ValueError:  # a kind evalsi does not know: kept as it is
        return Step("other", kind, output=bounded(entry))


def _result(content: str | None) -> JsonValue:
    if content is None:
        return None
    try:
        decoded: JsonValue = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content
    return decoded


def _last_answer(steps: list[Step]) -> str:
    for step in reversed(steps):
        if step.kind == "message" and step.name == "assistant" and isinstance(step.output, str):
            return step.output
    return ""


def _template(text: str, where: str) -> Any:
    from jinja2 import StrictUndefined, TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    try:
        return env.from_string(text)
    except TemplateSyntaxError as e:
        raise UserError(
            f"{where}: not a valid Jinja2 template: {e.message} (template line {e.lineno})"
        ) from None


def _path(text: str, where: str) -> JsonPath:
    try:
        return JsonPath(text)
    except UserError as e:
        raise UserError(f"{where}: {e.message}", hint=e.hint) from None


__all__ = ["DEFAULT_BODY", "HttpAgentHarness", "connect", "transcript_steps"]
