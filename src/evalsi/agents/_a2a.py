"""An Agent2Agent server as the agent (``spec.target.agent.a2a``), through ``a2a-sdk``.

Each task sends its input as one user message (``message/stream`` when the card says the agent
streams and the spec allows it, else ``message/send``) and reads what comes back: the agent's
messages, the task's status updates and its artifacts become the trajectory; the artifacts' text
(else the agent's last message) is the answer. The task's state decides how it ends:
``completed`` is an answer; ``failed``, ``rejected``, ``canceled`` are the agent failing
(graded, ``stop_reason`` the state); ``input-required`` / ``auth-required`` end the turn with that
``stop_reason``, the conversation's ids kept in the session so ``say`` and another ``run`` carry
it on (the user simulator's way in). A server that cannot be reached, answers 5xx or something
that is not A2A is infrastructure (``InfraError``); the task is lost, not failed.

Every request of a task goes through the cassette (``_cassette.exchange``, channel ``a2a``): the
card, then each message with the events it streamed collected into a list, so a replay rebuilds
the same trajectory with no call to the agent. The card is fetched for each task (answered from
memory after the first live fetch) so that each task's cassette stands alone.

Bounds: a response body (a whole stream included) past ``MAX_RESPONSE_BYTES``, or a stream of
more than ``MAX_EVENTS`` events, is a malformed response; a step keeps at most
``MAX_TEXT`` characters of any text, the answer at most ``MAX_OUTPUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalsi.agents._cassette import exchange
from evalsi.agents._harness import CheckResult, Final, HarnessInfo, TaskSetup
from evalsi.connectors import InfraError, TargetError, resolve_secret
from evalsi.core import Content, JsonValue, Step, UserError, missing_extra
from evalsi.specs import A2aAgentSpec

if TYPE_CHECKING:
    import httpx

    from evalsi.agents._connectors import ConnectorContext

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""One HTTP response (a card, an answer, or a whole stream of events) may be this large."""

MAX_EVENTS = 2000
"""Events one message's stream may carry."""

MAX_TEXT = 16_000
"""Characters of text a step keeps (the rest is cut, marked)."""

MAX_OUTPUT = 1_000_000
"""Characters of the answer kept."""

DEFAULT_SECONDS = 1800.0
"""One turn's limit without ``maxDuration`` (as for any harness)."""

CONNECT_SECONDS = 10.0

ENDING = {
    "completed": "final_answer",
    "failed": "failed",
    "rejected": "rejected",
    "canceled": "canceled",
    "input_required": "input_required",
    "auth_required": "auth_required",
}
"""A2A task state -> the turn's ``stop_reason``; other states mean the agent is not done."""


@contextlib.asynccontextmanager
async def connect(section: A2aAgentSpec, context: ConnectorContext) -> AsyncIterator[A2aHarness]:
    """The A2A agent ``section`` names, its card read once (unless the run replays) so that an
    address that is not an A2A agent stops the run before its first task."""
    try:
        import a2a.client  # noqa: F401
        import httpx
    except ModuleNotFoundError as e:
        raise (
            missing_extra(e, "A2A agents")
            or UserError(
                f"{context.where}: A2A agents need the a2a-sdk package ({e.name} is missing)",
                hint="pip install 'evalsi[a2a]'",
            )
        ) from None
    where = context.where
    headers: dict[str, str] = {}
    for name, value in section.headers.items():
        if context.replaying and value.startswith(("env:", "file:")):
            continue  # a pure replay reaches no agent: it needs none of its secrets
        if value.startswith(("env:", "file:")):
            try:
                value = resolve_secret(value).reveal()
            except UserError as e:
                raise UserError(f"{where}.headers.{name}: {e.message}", hint=e.hint) from None
        headers[name] = value
    if context.egress is not None:
        from evalsi.agents._egress import check_resolved

        await check_resolved(context.egress, section.url, f"{where}.url")
    seconds = context.agent.max_seconds or DEFAULT_SECONDS
    http = httpx.AsyncClient(
        transport=_bounded(httpx.AsyncHTTPTransport(), MAX_RESPONSE_BYTES),
        headers=headers,
        timeout=httpx.Timeout(seconds, connect=CONNECT_SECONDS),
        follow_redirects=False,
    )
    harness = A2aHarness(section, http, context, seconds)
    try:
        if not context.replaying:
            await harness.probe()
        yield harness
    finally:
        await http.aclose()


@dataclass(slots=True)
class _Session:
    task: TaskSetup
    pending: str
    context_id: str = ""
    task_id: str = ""
    turns: int = 0
    steps: list[Step] = field(default_factory=list)


class A2aHarness:
    """Sends each task's input to one A2A agent and reads its answer (see the module)."""

    def __init__(
        self,
        section: A2aAgentSpec,
        http: httpx.AsyncClient,
        context: ConnectorContext,
        seconds: float,
    ) -> None:
        self.section = section
        self.url = section.url
        self.http = http
        self.context = context
        self.seconds = seconds
        self._card: dict[str, Any] | None = None  # the card as JSON, once fetched live
        self._sessions: dict[str, _Session] = {}
        self._names = itertools.count()

    async def probe(self) -> None:
        """Read the card now: an address that is not an A2A agent is the spec's mistake."""
        try:
            card = self._parse_card(await self._fetch_card())
        except InfraError as e:
            raise UserError(
                f"{self.context.where}.url: no A2A agent at {self.url}: "
                f"{e.message.removeprefix(f'A2A agent {self.url}: ')}",
                hint="the agent's card must be served at URL/.well-known/agent-card.json",
            ) from None
        await self._client_for(card, stream=False)  # the card offers a transport we speak

    async def describe(self) -> HarnessInfo:
        card = self._card or {}
        name = str(card.get("name") or "a2a")
        return HarnessInfo(f"a2a:{name}", version=str(card.get("version") or ""))

    async def setup(self, task: TaskSetup) -> str:
        session = f"{task.task_id}/{task.trial}/{next(self._names)}"
        self._sessions[session] = _Session(task, task.input.as_text())
        return session

    def say(self, session: str, text: str) -> None:
        """The user's next message in ``session``: the next ``run`` sends it in the same
        conversation (context and task ids) as the turns before."""
        self._sessions[session].pending = text

    async def run(self, session: str) -> AsyncIterator[Step | Final]:
        s = self._sessions[session]
        try:
            async with asyncio.timeout(self.seconds):
                card = self._parse_card(
                    await exchange(
                        "a2a", {"method": "agent/card", "url": self.url}, self._card_live
                    )
                )
                stream = self.section.stream and bool(card.capabilities.streaming)
                request: dict[str, JsonValue] = {
                    "method": "message/stream" if stream else "message/send",
                    "url": self.url,
                    "text": s.pending,
                    "context_id": s.context_id,
                    "task_id": s.task_id,
                }

                async def live() -> list[dict[str, Any]]:
                    return await self._send(card, stream, request)

                events = await exchange("a2a", request, live)
        except TimeoutError:
            yield Final(Content.of_text(""), stop_reason="timeout")
            return
        s.turns += 1
        yield Step(kind="message", name="user", input=_cut(s.pending))
        turn = _Turn()
        if not isinstance(events, list):
            raise InfraError("malformed_response", f"A2A agent {self.url}: events not a list")
        for event in events:
            for step in turn.read(event):
                yield step
        # A follow-up continues an interrupted task; after a finished one it starts a new task
        # in the same conversation.
        s.context_id = turn.context_id or s.context_id
        s.task_id = turn.task_id if turn.state in ("input_required", "auth_required") else ""
        yield Final(Content.of_text(turn.answer()), stop_reason=turn.stop_reason())

    async def check(self, session: str) -> CheckResult:
        s = self._sessions.get(session)
        if s is None or not (s.context_id or s.task_id):
            return CheckResult()
        return CheckResult(end_state={"context_id": s.context_id, "task_id": s.task_id})

    async def teardown(self, session: str) -> None:
        self._sessions.pop(session, None)

    # -- the calls (inside ``exchange``) --------------------------------------------------

    async def _card_live(self) -> dict[str, Any]:
        if self._card is None:
            self._card = await self._fetch_card()
        return self._card

    async def _fetch_card(self) -> dict[str, Any]:
        from a2a.client import A2ACardResolver
        from google.protobuf.json_format import MessageToDict

        resolver = A2ACardResolver(self.http, self.url.rstrip("/"))
        try:
            card = await resolver.get_agent_card()
        except Exception as e:  # noqa: BLE001 - sorted into infra kinds below
            raise _infra(e, self.url, "reading the agent card") from None
        value: dict[str, Any] = MessageToDict(card)
        return value

    def _parse_card(self, value: Any) -> Any:
        from a2a.client.card_resolver import parse_agent_card

        if not isinstance(value, dict):
            raise InfraError("malformed_response", f"A2A agent {self.url}: card not an object")
        try:
            return parse_agent_card(dict(value))
        except Exception as e:  # noqa: BLE001 - a card protobuf cannot read
            raise InfraError(
                "malformed_response", f"A2A agent {self.url}: unreadable card: {e}"
            ) from None

    async def _client_for(self, card: Any, *, stream: bool) -> Any:
        from a2a.client import ClientConfig, ClientFactory

        egress = self.context.egress
        for interface in card.supported_interfaces:
            if egress is not None and interface.url:
                egress.check_url(interface.url, where=f"{self.context.where}.url (agent card)")
        config = ClientConfig(
            httpx_client=self.http,
            streaming=stream,
            supported_protocol_bindings=["JSONRPC", "HTTP+JSON"],
        )
        try:
            return ClientFactory(config).create(card)
        except ValueError as e:
            raise UserError(
                f"{self.context.where}.url: the agent card at {self.url} offers no JSON-RPC or "
                f"HTTP+JSON interface ({e})"
            ) from None

    async def _send(
        self, card: Any, stream: bool, request: Mapping[str, JsonValue]
    ) -> list[dict[str, Any]]:
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
        from google.protobuf.json_format import MessageToDict

        client = await self._client_for(card, stream=stream)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=str(request["text"]))],
            context_id=str(request["context_id"] or ""),
            task_id=str(request["task_id"] or ""),
        )
        events: list[dict[str, Any]] = []
        try:
            async for event in client.send_message(SendMessageRequest(message=message)):
                if len(events) >= MAX_EVENTS:
                    raise InfraError(
                        "malformed_response",
                        f"A2A agent {self.url} streamed more than {MAX_EVENTS} events",
                    )
                value = MessageToDict(event)
                value.get("task", {}).pop("history", None)  # our own message, echoed
                events.append(value)
        except InfraError:
            raise
        except Exception as e:  # noqa: BLE001 - sorted into infra kinds below
            raise _infra(e, self.url, "sending the message") from None
        return events


class _Turn:
    """The events of one message, read in order: steps out, and what the answer is."""

    def __init__(self) -> None:
        self.state = ""
        self.context_id = ""
        self.task_id = ""
        self.last_message = ""
        self.artifacts: dict[str, tuple[str, list[str]]] = {}  # id -> (name, texts)

    def read(self, event: Any) -> list[Step]:
        if not isinstance(event, dict):
            raise InfraError("malformed_response", "A2A event not an object")
        steps: list[Step] = []
        if "message" in event:
            steps += self._message(event["message"])
        if "task" in event:
            task = event["task"]
            self._ids(task, "id")
            for artifact in task.get("artifacts", ()):
                steps += self._artifact(artifact, append=False)
            steps += self._status(task.get("status", {}))
        if "statusUpdate" in event:
            update = event["statusUpdate"]
            self._ids(update, "taskId")
            steps += self._status(update.get("status", {}))
        if "artifactUpdate" in event:
            update = event["artifactUpdate"]
            self._ids(update, "taskId")
            steps += self._artifact(update.get("artifact", {}), append=bool(update.get("append")))
        return steps

    def _ids(self, value: dict[str, Any], task_key: str) -> None:
        self.context_id = str(value.get("contextId") or self.context_id)
        self.task_id = str(value.get(task_key) or self.task_id)

    def _message(self, message: dict[str, Any]) -> list[Step]:
        self.context_id = str(message.get("contextId") or self.context_id)
        text = _text(message.get("parts", ()))
        if message.get("role") == "ROLE_USER":
            return []
        self.last_message = text
        self.state = self.state or "completed"  # a message alone is the whole answer
        return [Step(kind="message", name="agent", output=_cut(text))]

    def _status(self, status: dict[str, Any]) -> list[Step]:
        state = str(status.get("state", "")).removeprefix("TASK_STATE_").lower()
        if not state or state == "unspecified":
            return []
        self.state = state
        output: dict[str, JsonValue] = {"state": state}
        message = status.get("message")
        if isinstance(message, dict):
            text = _text(message.get("parts", ()))
            self.last_message = text or self.last_message
            output["message"] = _cut(text)
        return [Step(kind="other", name="status_update", output=output)]

    def _artifact(self, artifact: dict[str, Any], *, append: bool) -> list[Step]:
        key = str(artifact.get("artifactId") or len(self.artifacts))
        name = str(artifact.get("name") or "")
        texts = [_text([p]) for p in artifact.get("parts", ())]
        old = self.artifacts.get(key)
        if append and old is not None:
            self.artifacts[key] = (old[0] or name, old[1] + texts)
        else:
            self.artifacts[key] = (name, texts)
        output: dict[str, JsonValue] = {"artifact": name, "text": _cut("".join(texts))}
        if append:
            output["append"] = True
        return [Step(kind="other", name="artifact", output=output)]

    def answer(self) -> str:
        if self.artifacts:
            text = "\n".join("".join(texts) for _, texts in self.artifacts.values())
        else:
            text = self.last_message
        return text[:MAX_OUTPUT]

    def stop_reason(self) -> str:
        if self.state in ENDING:
            return ENDING[self.state]
        if not self.state:
            raise InfraError("malformed_response", "the A2A agent answered with no task or message")
        # submitted / working: the stream ended before the task did
        return "incomplete"


def _text(parts: Any) -> str:
    """The text of A2A parts: text as is, data as JSON, files by name or URL."""
    out: list[str] = []
    for p in parts if isinstance(parts, list | tuple) else ():
        if not isinstance(p, dict):
            continue
        if "text" in p:
            out.append(str(p["text"]))
        elif "data" in p:
            import orjson

            out.append(orjson.dumps(p["data"], option=orjson.OPT_SORT_KEYS).decode())
        elif "url" in p or "raw" in p:
            out.append(f"[file {p.get('filename') or p.get('url') or ''}]".replace(" ]", "]"))
    return "".join(out)


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}… [{len(text) - MAX_TEXT} more characters]"


class _TooLarge(Exception):
    """A response past ``MAX_RESPONSE_BYTES``."""


def _infra(error: BaseException, url: str, doing: str) -> Exception:
    """The SDK's or httpx's error as an ``InfraError`` (or a ``TargetError`` for a 4xx the
    spec must fix: a rejected key, a wrong path)."""
    import httpx

    chain: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and len(chain) < 10:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for cause in chain:
        if isinstance(cause, _TooLarge):
            return InfraError("malformed_response", f"A2A agent {url}: {cause}")
        if isinstance(cause, httpx.TimeoutException):
            return InfraError("timeout", f"A2A agent {url}: no answer in time, {doing}")
        if isinstance(cause, httpx.TransportError):
            return InfraError("connection", f"A2A agent {url}: {doing}: {cause}")
    status = next(
        (getattr(c, "status_code", None) for c in chain if getattr(c, "status_code", None)),
        None,
    ) or next((c.response.status_code for c in chain if isinstance(c, httpx.HTTPStatusError)), None)
    message = f"A2A agent {url}: {doing}: {type(error).__name__}: {error}"[:2000]
    if status == 429:
        return InfraError("rate_limited", message, status=429)
    if status is not None and 400 <= status < 500 and status not in (404, 405, 408):
        return TargetError(message, status=status)
    if status is not None and status >= 500:
        return InfraError("server_error", message, status=status)
    if status is not None:
        return InfraError("malformed_response", message, status=status)
    from a2a.client import A2AClientError

    if isinstance(error, A2AClientError) and "JSON" in str(error):
        return InfraError("malformed_response", message)
    return InfraError("server_error", message)


def _bounded(inner: Any, limit: int) -> Any:
    """``inner`` (an httpx transport) with every response body bounded to ``limit`` bytes: read
    past it, the body raises ``_TooLarge`` (httpx is imported only with the extra)."""
    import httpx

    class BoundedStream(httpx.AsyncByteStream):
        def __init__(self, body: Any) -> None:
            self.body = body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.body:
                seen += len(chunk)
                if seen > limit:
                    raise _TooLarge(f"response larger than {limit} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self.body.aclose()

    class Bounded(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response: httpx.Response = await inner.handle_async_request(request)
            response.stream = BoundedStream(response.stream)
            return response

        async def aclose(self) -> None:
            await inner.aclose()

    return Bounded()
