"""The simulated user of a multi-turn task (``spec.target.agent.user``).

A task with a simulated user is a conversation: the sample's input is the user's first
message; after each of the agent's answers the simulator writes the next one, playing a person
with a ``persona``, a ``goal`` and ``hidden`` information it gives only when asked. The
conversation ends when the user says its stop token (``user_stop``), when the agent ends it
(``agent_stop``: an empty answer, or the stop token in it; an exhausted agent budget keeps its
own reason), or after ``max_turns`` user messages (``max_turns``).

The simulator's model is configured like a judge: its own connector, its own account of
calls, tokens and dollars (never added to the agent's usage: the agent is graded on what it
spent), an optional ``max_usd`` for the whole run, a concurrency limit, and an answer cache
handed in by the run (the store's), keyed by the conversation so far and the seed, so an
unchanged suite re-run asks nothing again. Each model call also goes through the task's
cassette on channel ``user``, so a replayed run needs no simulator model either.

``connector: scripted`` needs no model: it says the sample's ``metadata.user.turns`` in order,
then the stop token, for tests and for benchmarks' known-good runs. A sample's
``metadata.user`` (``persona``, ``goal``, ``hidden``, ``turns``) overrides the spec's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from evalsi.agents._cassette import exchange
from evalsi.agents._harness import Final, TaskSetup
from evalsi.agents._loop import ChatModel, Price
from evalsi.connectors import MODEL_CONNECTORS, InfraError, TargetError
from evalsi.core import (
    CallAccount,
    Content,
    Message,
    Step,
    Usage,
    UserError,
    content_hash,
    message_to_dict,
)
from evalsi.specs import UserSimulatorSpec

USER_CONNECTORS = (*MODEL_CONNECTORS, "scripted")
MAX_TURNS_LIMIT = 100
DEFAULT_CONCURRENCY = 8

SYSTEM_PROMPT = """\
You are role-playing a person who has come to a support agent for help. You are the user, \
never the agent: do not offer help, do not call tools, do not describe what the agent should do.

Who you are:
{persona}

What you want from this conversation:
{goal}

What you know but keep to yourself until the agent asks for it (give only the piece asked for, \
never the whole list at once, and never invent facts that are not here; if asked for something \
you were not told, say you do not know):
{hidden}

Write only your next message to the agent, in plain words, as this person would. Keep it short.
When your goal has been met, or the agent has made clear that it cannot be met, answer with \
{stop} on its own (a short thanks before it is fine)."""

Role = Literal["user", "agent"]


class ReplyCache(Protocol):
    """Where the simulator's answers are kept between runs (the run's store)."""

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, text: str, usage: Mapping[str, Any]) -> None: ...


SimulatorAccount = CallAccount
"""What the simulated user cost in this session, apart from the agent's usage."""


@dataclass(frozen=True, slots=True)
class UserTurn:
    """One message of the simulated user, and what producing it cost (``usage``)."""

    text: str
    usage: Usage = field(default_factory=Usage)
    stop: bool = False
    cached: bool = False


@dataclass(frozen=True, slots=True)
class Persona:
    """Who the user is in one task: the spec's fields with the sample's ``metadata.user``."""

    persona: str = ""
    goal: str = ""
    hidden: str = ""
    turns: tuple[str, ...] = ()

    def system_prompt(self, stop_token: str) -> str:
        return SYSTEM_PROMPT.format(
            persona=self.persona or "(an ordinary customer)",
            goal=self.goal or "(get the request of your first message handled)",
            hidden=self.hidden or "(nothing beyond your first message)",
            stop=stop_token,
        )


def persona_of(spec: UserSimulatorSpec, metadata: Mapping[str, Any], sample_id: str) -> Persona:
    """The task's persona; a ``TargetError`` naming the sample when ``metadata.user`` is bad."""
    where = f"sample {sample_id!r}: metadata.user"
    user = metadata.get("user")
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise TargetError(f"{where}: expected an object {{persona, goal, hidden, turns}}")
    unknown = sorted(set(user) - {"persona", "goal", "hidden", "turns"})
    if unknown:
        raise TargetError(
            f"{where}: unknown field(s) {', '.join(map(repr, unknown))}",
            hint="known: persona, goal, hidden, turns",
        )
    for name in ("persona", "goal", "hidden"):
        if name in user and not isinstance(user[name], str):
            raise TargetError(f"{where}.{name}: expected text")
    turns = user.get("turns", ())
    if not isinstance(turns, Sequence) or isinstance(turns, str):
        raise TargetError(f"{where}.turns: expected a list of messages")
    if not all(isinstance(t, str) for t in turns):
        raise TargetError(f"{where}.turns: every turn must be text")
    return Persona(
        persona=user.get("persona", spec.persona),
        goal=user.get("goal", spec.goal),
        hidden=user.get("hidden", spec.hidden),
        turns=tuple(turns),
    )


class UserSimulator:
    """The run's simulated user: ``for_task`` gives each task its own conversation partner.

    Example (the scripted one plays the sample's turns, then stops):
        >>> spec = UserSimulatorSpec(connector="scripted", model="turns")
        >>> user = UserSimulator(spec).for_task("s1", {"user": {"turns": ["it is 42"]}})
        >>> asyncio.run(user.next([("user", "hi"), ("agent", "your id?")])).text
        'it is 42'
        >>> asyncio.run(user.next([])).text
        '###STOP###'
    """

    def __init__(
        self,
        spec: UserSimulatorSpec,
        model: ChatModel | None = None,
        *,
        price: Price | None = None,
        cache: ReplyCache | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        at = "spec.target.agent.user"
        if spec.connector not in USER_CONNECTORS:
            raise UserError(
                f"{at}.model.connector: unknown connector {spec.connector!r}",
                hint="use one of: " + ", ".join(USER_CONNECTORS),
            )
        if not spec.model:
            raise UserError(f"{at}.model.model: the simulator's model is required")
        if not 1 <= spec.max_turns <= MAX_TURNS_LIMIT:
            raise UserError(f"{at}.maxTurns: expected 1 to {MAX_TURNS_LIMIT}, got {spec.max_turns}")
        if not spec.stop_token.strip():
            raise UserError(f"{at}.stopToken: must not be blank")
        if spec.max_usd is not None and spec.max_usd <= 0:
            raise UserError(f"{at}.maxUsd: expected more than 0, got {spec.max_usd}")
        if spec.connector != "scripted" and model is None:
            raise UserError(f"{at}.model: a {spec.connector} simulator needs its model client")
        self.spec = spec
        self.model = model if spec.connector != "scripted" else None
        self.price = price
        self.cache = cache
        self.account = SimulatorAccount()
        self._limit = asyncio.Semaphore(max(1, concurrency))

    def describe(self) -> dict[str, Any]:
        """For the manifest: the simulator's model and settings, never its secret."""
        s = self.spec
        out: dict[str, Any] = {"connector": s.connector, "model": s.model}
        if s.base_url:
            out["base_url"] = s.base_url
        if s.params:
            out["params"] = dict(s.params)
        out.update(stop_token=s.stop_token, max_turns=s.max_turns)
        out["prompt_hash"] = content_hash(SYSTEM_PROMPT)
        return out

    def for_task(self, sample_id: str, metadata: Mapping[str, Any]) -> SimulatedUser:
        return SimulatedUser(self, persona_of(self.spec, metadata, sample_id))

    async def reply(self, messages: list[Message], seed: int | None) -> UserTurn:
        """The model's next user message: from the cache, else asked (within the budget)."""
        assert self.model is not None
        ident = {k: v for k, v in self.describe().items() if k != "prompt_hash"}
        key = content_hash(
            {
                "user_simulator": ident,
                "messages": [message_to_dict(m) for m in messages],
                "seed": seed,
            }
        )
        if self.cache is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                self.account.cached += 1
                zero = Usage(input_tokens=0, output_tokens=0, total_tokens=0, cost_usd=0.0)
                return UserTurn(hit, zero, cached=True)
        budget = self.spec.max_usd
        if budget is not None and self.account.usd >= budget:
            raise InfraError(
                "harness",  # no kind of its own yet: the message names the simulator
                f"spec.target.agent.user.maxUsd: the simulated user spent its ${budget:g}; "
                "the conversation cannot go on",
            )
        async with self._limit:
            completion = await self.model.complete(messages, seed=seed)
        usage = completion.usage
        usage.latency_ms = None  # the user's time is not the agent's
        cost = self.price(self.spec.model, usage) if self.price is not None else usage.cost_usd
        usage.cost_usd = cost
        self._account(usage, cost)
        text = completion.text or ""
        if self.cache is not None and text.strip():
            await self.cache.put(key, text, usage.known())
        return UserTurn(text, usage)

    def _account(self, usage: Usage, cost: float | None) -> None:
        a = self.account
        a.calls += 1
        a.input_tokens += usage.input_tokens or 0
        a.output_tokens += usage.output_tokens or 0
        a.tokens += usage.tokens() or 0
        if cost is None:
            a.usd_unknown += 1
        else:
            a.usd += cost


class SimulatedUser:
    """One task's user: ``next(transcript)`` is its next message to the agent."""

    def __init__(self, simulator: UserSimulator, persona: Persona) -> None:
        self.simulator = simulator
        self.persona = persona
        self.said = 0  # simulated messages so far

    @property
    def stop_token(self) -> str:
        return self.simulator.spec.stop_token

    def messages(self, transcript: Sequence[tuple[Role, str]]) -> list[Message]:
        """The conversation from the user's side: its own messages as the model's
        (``assistant``), the agent's as ``user``, after the persona's system prompt."""
        out = [Message(role="system", content=self.persona.system_prompt(self.stop_token))]
        if transcript and transcript[0][0] == "user":
            # chat APIs want a user message first; this one only opens the role-play
            out.append(Message(role="user", content="(The support agent is listening.)"))
        for role, text in transcript:
            out.append(Message(role="assistant" if role == "user" else "user", content=text))
        return out

    async def next(
        self, transcript: Sequence[tuple[Role, str]], *, seed: int | None = None
    ) -> UserTurn:
        index = self.said
        self.said += 1
        sim = self.simulator
        if sim.model is None:
            turns = self.persona.turns
            text = turns[index] if index < len(turns) else self.stop_token
            words = len(text.split())
            return UserTurn(text, Usage(input_tokens=0, output_tokens=words), self._stops(text))
        messages = self.messages(transcript)
        request = {
            "model": sim.spec.model,
            "messages": [message_to_dict(m) for m in messages],
            "seed": seed,
        }

        async def live() -> dict[str, Any]:
            turn = await sim.reply(messages, seed)
            return {"text": turn.text, "usage": turn.usage.known(), "cached": turn.cached}

        got = await exchange("user", request, live)
        text = str(got["text"])
        return UserTurn(text, Usage(**got["usage"]), self._stops(text), bool(got["cached"]))

    def _stops(self, text: str) -> bool:
        return self.stop_token in text


def agent_ended(output: str, stop_token: str) -> bool:
    """Whether the agent's answer ends the conversation: nothing said, or the stop token."""
    return not output.strip() or stop_token in output


async def converse(
    user: SimulatedUser,
    setup: TaskSetup,
    steps: list[Step],
    final: Final,
    turn: Callable[[Content], Awaitable[None]],
    run: Callable[[], Awaitable[tuple[list[Step], Final]]],
) -> Final:
    """The rest of a conversation, after the agent's first answer ``final``: the user's
    messages join ``steps`` as ``message`` steps named ``user`` (their usage is the
    simulator's, never added to the agent's); ``turn`` hands one to the harness and ``run``
    gets the agent's next steps and answer. The ``Final`` returned holds the agent's last
    answer, its usage over every turn, and why the conversation ended."""
    transcript: list[tuple[Role, str]] = [("user", setup.input.as_text())]
    usage = final.usage
    said_turns = 1  # the sample's input was the user's first message
    while True:
        answer = final.output.as_text()
        transcript.append(("agent", answer))
        if final.stop_reason != "final_answer":
            return dataclasses.replace(final, usage=usage)  # an agent budget ran out
        if agent_ended(answer, user.stop_token):
            return dataclasses.replace(final, usage=usage, stop_reason="agent_stop")
        if said_turns >= user.simulator.spec.max_turns:
            return dataclasses.replace(final, usage=usage, stop_reason="max_turns")
        began = time.time_ns()
        said = await user.next(transcript, seed=setup.seed)
        said_turns += 1
        steps.append(
            Step(
                "message",
                "user",
                input={"role": "user", "turn": said_turns, "simulated": True},
                output={"role": "user", "text": said.text},
                usage=said.usage,
                start_time_unix_nano=began,
                end_time_unix_nano=time.time_ns(),
            )
        )
        if said.stop:
            return dataclasses.replace(final, usage=usage, stop_reason="user_stop")
        transcript.append(("user", said.text))
        await turn(Content.of_text(said.text))
        more, final = await run()
        steps.extend(more)
        usage = _sum_usage(usage, final.usage)


def _sum_usage(a: Usage, b: Usage) -> Usage:
    """Two turns' usage: a figure unknown in either stays unknown."""

    def add(x: Any, y: Any) -> Any:
        return None if x is None or y is None else x + y

    return Usage(
        input_tokens=add(a.input_tokens, b.input_tokens),
        output_tokens=add(a.output_tokens, b.output_tokens),
        total_tokens=add(a.tokens(), b.tokens()),
        cost_usd=add(a.cost_usd, b.cost_usd),
        latency_ms=add(a.latency_ms, b.latency_ms),
    )
