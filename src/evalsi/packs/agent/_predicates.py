"""Predicates: deterministic pass/fail checks of a transcript, each configured by params and
scoped to a turn (``_turns``): ``tool-called``, ``tool-not-called``, ``tool-order``,
``tool-count``, ``final-answer``, ``no-tool-error`` and ``within-budget``.

Each gives one verdict whose explanation is the evidence: the step it matched (its number in
the trajectory, the tool, the arguments) or why nothing matched. Params are checked when the
evaluator is bound, so a bad one is a ParamError before any record is read.

A call the tool policy blocked was never made, so it cannot be judged: a predicate that needs
the call (``tool-called``, ``tool-count`` with ``min`` >= 1, ``tool-order``) whose tool has a
``policy_block`` step in scope and no call there reports ``not_measured(blocked_by_policy)``
(a SKIPPED record), not a failure. The predicates over the answer and the budget still score.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

import orjson

from evalsi.core import ParamError, Record, Score, Step
from evalsi.evaluators import NotMeasured, Skip
from evalsi.packs._declare import builtin, check_choice, clip, few, passed
from evalsi.packs.agent._calls import Call, agent_calls, args_match, canonical
from evalsi.packs.agent._efficiency import check_budgets, over_budget, step_tokens, tokens_of
from evalsi.packs.agent._turns import Turn, TurnScope, answer_of, check_turn, scope_of

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

Match = Literal["exact", "subset", "schema"]
_EXAMPLE = "evalsi eval --data examples/agent/predicates.jsonl --evaluators "


def _calls(record: Record, scope: TurnScope) -> list[Call]:
    numbers = scope.numbers()
    return [c for c in agent_calls(record.trajectory) if c.step in numbers]


def _shown(call: Call) -> str:
    return f"step {call.step}: {clip(call.key)}"


def _blocked(scope: TurnScope, tool: str | None) -> tuple[int, Step] | None:
    """The first ``policy_block`` step in scope of ``tool`` (of any tool when None)."""
    return next(
        (
            (i, s)
            for i, s in scope.steps
            if s.kind == "policy_block" and (tool is None or s.name == tool)
        ),
        None,
    )


def _not_measured(block: tuple[int, Step], scope: TurnScope) -> NotMeasured:
    i, step = block
    reason = step.output.get("reason") if isinstance(step.output, dict) else None
    why = f" ({clip(str(reason))})" if reason else ""
    return NotMeasured(
        "blocked_by_policy",
        f"{step.name} was blocked by the tool policy at step {i}{why} and never called"
        f"{scope.where}",
    )


def _listed(items: list[str], shown: int = 3) -> str:
    """Like ``few``, with ``; `` between items that hold commas themselves."""
    more = f"; and {len(items) - shown} more" if len(items) > shown else ""
    return "; ".join(items[:shown]) + more


def _check_tool(evaluator: str, tool: str | None) -> None:
    if tool is not None and not tool.strip():
        raise ParamError(f"{evaluator}: param 'tool' must name a tool, got {tool!r}")


def _others(calls: list[Call]) -> str:
    return (
        "; the calls were: " + few([f"{c.name} at step {c.step}" for c in calls])
        if calls
        else "; no tool was called"
    )


class ToolCalled:
    """Pass when the agent called ``tool`` in scope (with matching arguments, when given).

    The evidence is the first matching call: ``step 4: book_flight({"flight_id":"TP523"})``.
    A tool the policy blocked and the agent never called is not measured.

    Args:
        tool: the tool's name.
        arguments: the arguments the call must have; with ``match=schema``, a JSON Schema
            (Draft 2020-12) the arguments must satisfy.
        match: ``exact`` (default: equal as parsed JSON), ``subset`` (every argument given is
            present with an equal value) or ``schema``.
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(
        self,
        *,
        tool: str,
        arguments: dict[str, Any] | None = None,
        match: Match | None = None,
        turn: Any = "any",
    ) -> None:
        _check_tool("tool-called", tool)
        self.tool = tool
        self.turn: Turn = check_turn("tool-called", turn)
        if match is not None and arguments is None:
            raise ParamError("tool-called: param 'match' needs the param 'arguments'")
        self.match: Match = match or "exact"
        check_choice("tool-called", "match", self.match, ("exact", "subset", "schema"))
        self.arguments = arguments
        self._validator: Validator | None = None
        if arguments is not None and self.match == "schema":
            self._validator = _schema_validator("tool-called", arguments)
        self._reference = None if arguments is None else Call(tool, arguments)

    def _fits(self, call: Call) -> str | None:
        """None when the call's arguments fit, else why not."""
        if self._validator is not None:
            error = next(iter(self._validator.iter_errors(call.arguments)), None)
            return None if error is None else f"{error.json_path}: {clip(error.message)}"
        if self._reference is None:
            return None
        mode: Literal["exact", "subset"] = "subset" if self.match == "subset" else "exact"
        return None if args_match(call, self._reference, mode) else "arguments differ"

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        calls = _calls(record, scope)
        named = [c for c in calls if c.name == self.tool]
        misfits = [(c, self._fits(c)) for c in named]
        hits = [c for c, why in misfits if why is None]
        if hits:
            more = f" (and {len(hits) - 1} more matching call(s))" if len(hits) > 1 else ""
            return Score(passed=True, explanation=f"called{scope.where}: {_shown(hits[0])}{more}")
        block = _blocked(scope, self.tool) if not named else None
        if block is not None:
            raise _not_measured(block, scope)
        if not named:
            return Score(
                passed=False,
                explanation=f"{self.tool} was not called{scope.where}{_others(calls)}",
            )
        want = (
            "satisfying the schema"
            if self.match == "schema"
            else f"with {self.match} arguments {clip(canonical(self.arguments))}"
        )
        seen = _listed([f"{_shown(c)} ({why})" for c, why in misfits])
        return Score(
            passed=False,
            explanation=f"{self.tool} was called {len(named)} time(s){scope.where}, never "
            f"{want}: {seen}",
        )


class ToolNotCalled:
    """Pass when the agent never called ``tool`` in scope. A call the policy blocked was not
    made: it does not count (the evidence mentions the block).

    Args:
        tool: the tool's name.
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(self, *, tool: str, turn: Any = "any") -> None:
        _check_tool("tool-not-called", tool)
        self.tool = tool
        self.turn: Turn = check_turn("tool-not-called", turn)

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        named = [c for c in _calls(record, scope) if c.name == self.tool]
        if named:
            more = f" ({len(named)} calls in all)" if len(named) > 1 else ""
            return Score(
                passed=False,
                explanation=f"{self.tool} was called{scope.where}: {_shown(named[0])}{more}",
            )
        block = _blocked(scope, self.tool)
        note = f" (blocked by the tool policy at step {block[0]})" if block else ""
        return Score(passed=True, explanation=f"{self.tool} was not called{scope.where}{note}")


class ToolOrder:
    """Pass when the agent called ``tools`` in this order in scope: as a subsequence (other
    calls may come between), or with ``strict=true`` as consecutive tool calls (no other tool
    call between them; steps of other kinds may be). A tool of the list the policy blocked and
    the agent never called makes the order not measured, unless the order already fails
    without it.

    Args:
        tools: the tool names, in order.
        strict: the calls must be consecutive.
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(self, *, tools: list[str], strict: bool = False, turn: Any = "any") -> None:
        if not tools or not all(isinstance(t, str) and t.strip() for t in tools):
            raise ParamError(
                f"tool-order: param 'tools' must list at least one tool name, got {tools!r}"
            )
        self.tools = list(tools)
        self.strict = strict
        self.turn: Turn = check_turn("tool-order", turn)

    def _find(self, calls: list[Call], tools: list[str]) -> list[Call]:
        """The calls that hold the order, or as far as it got (a partial match)."""
        if self.strict:
            best: list[Call] = []
            for start in range(len(calls)):
                run = []
                for call, want in zip(calls[start:], tools, strict=False):
                    if call.name != want:
                        break
                    run.append(call)
                if len(run) > len(best):
                    best = run
            return best
        found: list[Call] = []
        for call in calls:
            if len(found) < len(tools) and call.name == tools[len(found)]:
                found.append(call)
        return found

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        calls = _calls(record, scope)
        found = self._find(calls, self.tools)
        shown = ", ".join(f"{c.name} at step {c.step}" for c in found)
        if len(found) == len(self.tools):
            return Score(passed=True, explanation=f"in order{scope.where}: {shown}")
        called = {c.name for c in calls}
        blocks = {t: _blocked(scope, t) for t in self.tools if t not in called}
        blocked = {t: b for t, b in blocks.items() if b is not None}
        rest = [t for t in self.tools if t not in blocked]
        if blocked and len(self._find(calls, rest)) == len(rest):
            raise _not_measured(next(iter(blocked.values())), scope)
        sequence = " → ".join(c.name for c in calls) or "none"
        if self.strict:
            why = f"no consecutive calls {', '.join(self.tools)}{scope.where}"
            if found:
                why += f" (longest run: {shown})"
        else:
            after = f" after step {found[-1].step}" if found else ""
            why = f"no call of {self.tools[len(found)]}{after}{scope.where}"
            if found:
                why += f" (matched {shown})"
        return Score(passed=False, explanation=f"{why}; the calls: {clip(sequence)}")


class ToolCount:
    """Pass when the number of calls in scope (of ``tool``, or of every tool) is within
    ``min`` and ``max`` (inclusive). With ``min`` >= 1, a tool the policy blocked and the agent
    never called is not measured.

    Args:
        tool: count only this tool's calls (default: every tool call).
        min: the fewest calls allowed.
        max: the most calls allowed.
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(
        self,
        *,
        tool: str | None = None,
        min: int | None = None,
        max: int | None = None,
        turn: Any = "any",
    ) -> None:
        _check_tool("tool-count", tool)
        if min is None and max is None:
            raise ParamError("tool-count: give the param 'min', 'max' or both")
        for name, value in (("min", min), ("max", max)):
            if value is not None and value < 0:
                raise ParamError(f"tool-count: param {name!r} must be >= 0, got {value}")
        if min is not None and max is not None and min > max:
            raise ParamError(f"tool-count: param 'min' ({min}) is greater than 'max' ({max})")
        self.tool, self.min, self.max = tool, min, max
        self.turn: Turn = check_turn("tool-count", turn)

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        calls = [c for c in _calls(record, scope) if self.tool is None or c.name == self.tool]
        n = len(calls)
        low, high = self.min, self.max
        ok = (low is None or n >= low) and (high is None or n <= high)
        if not ok and n == 0 and (low or 0) >= 1:
            block = _blocked(scope, self.tool)
            if block is not None:
                raise _not_measured(block, scope)
        what = self.tool or "tool"
        bounds = (
            f"{low} to {high}" if low is not None and high is not None
            else f"at least {low}" if low is not None
            else f"at most {high}"
        )  # fmt: skip
        steps = f" (steps {few([str(c.step) for c in calls], 10)})" if calls else ""
        return Score(
            passed=ok,
            explanation=f"{what} called {n} time(s){scope.where}{steps}; expected {bounds}",
        )


class FinalAnswer:
    """Pass when the final answer matches: ``regex`` (searched anywhere in it), ``contains``
    (a substring, case-sensitive) or ``json`` (``true``: the answer parses as JSON; an object:
    the answer is a JSON object containing it, nested objects as subsets too). Exactly one.

    The final answer of the last turn is the record's output; of an earlier turn, its last
    assistant message (else its last model call's text). With ``turn=any``, the answer of any
    turn may match. A call the policy blocked does not stop this from scoring.

    Args:
        regex: a regular expression (Python syntax) the answer must contain a match of.
        contains: text the answer must contain.
        json: ``true``, or an object the answer must contain.
        turn: a turn number (1-based), ``last`` or ``any`` (default: any turn).
    """

    def __init__(
        self,
        *,
        regex: str | None = None,
        contains: str | None = None,
        json: Any = None,
        turn: Any = "any",
    ) -> None:
        given = [
            n
            for n, v in (("regex", regex), ("contains", contains), ("json", json))
            if v is not None
        ]
        if len(given) != 1:
            raise ParamError(
                "final-answer: give exactly one of the params 'regex', 'contains', 'json'"
                + (f" (got {', '.join(given)})" if given else "")
            )
        self._pattern: re.Pattern[str] | None = None
        if regex is not None:
            try:
                self._pattern = re.compile(regex)
            except re.error as e:
                raise ParamError(
                    f"final-answer: param 'regex' is not a valid regular expression: {e}"
                ) from None
        if json is not None and json is not True and not isinstance(json, dict):
            raise ParamError(
                "final-answer: param 'json' must be true (the answer is JSON) or an object "
                f"(the answer contains it), got {json!r}"
            )
        self.regex, self.contains, self.json = regex, contains, json
        self.turn: Turn = check_turn("final-answer", turn)

    def _judge(self, answer: str) -> tuple[bool, str]:
        if self._pattern is not None:
            hit = self._pattern.search(answer)
            if hit is None:
                return False, f"does not match /{self.regex}/"
            return True, f"matches /{self.regex}/ at {hit.start()}: {clip(hit.group(0), 60)!r}"
        if self.contains is not None:
            at = answer.find(self.contains)
            if at < 0:
                return False, f"does not contain {self.contains!r}"
            return True, f"contains {self.contains!r} at {at}"
        try:
            value = orjson.loads(answer.strip())
        except orjson.JSONDecodeError as e:
            return False, f"is not JSON ({e})"
        if self.json is True:
            return True, "is JSON"
        missing = _missing(self.json, value, "$")
        if missing:
            return False, f"does not contain the expected JSON: {missing}"
        return True, f"contains {clip(canonical(self.json), 60)}"

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        verdicts: list[str] = []
        for number, steps in scope.turns:
            answer = answer_of(record, number, steps, scope.count)
            if answer is None:
                continue
            label = f"turn {number}'s answer" if len(scope.turns) > 1 else "the final answer"
            ok, why = self._judge(answer)
            verdicts.append(f"{label} {why}: {clip(answer, 80)!r}")
            if ok:
                return Score(passed=True, explanation=verdicts[-1])
        if not verdicts:
            return Score(passed=False, explanation=f"no final answer{scope.where}")
        return Score(passed=False, explanation=_listed(verdicts))


def _missing(want: Any, got: Any, path: str) -> str:
    """Where ``got`` lacks part of ``want`` (objects as subsets, anything else equal); "" if
    nowhere."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path} is not an object"
        for key, value in want.items():
            if key not in got:
                return f"{path}.{key} is missing"
            inner = _missing(value, got[key], f"{path}.{key}")
            if inner:
                return inner
        return ""
    if canonical(want) != canonical(got):
        return f"{path} is {clip(canonical(got), 40)}, expected {clip(canonical(want), 40)}"
    return ""


class NoToolError:
    """Pass when no tool call in scope failed (a ``tool_call`` step with an error: the tool
    raised, timed out, or the call named no tool). The evidence lists the failed calls.

    Args:
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(self, *, turn: Any = "any") -> None:
        self.turn: Turn = check_turn("no-tool-error", turn)

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        calls = [(i, s) for i, s in scope.steps if s.kind == "tool_call"]
        failed = [f"step {i}: {s.name} failed: {clip(s.error, 80)}" for i, s in calls if s.error]
        if failed:
            return Score(passed=False, explanation=_listed(failed))
        return Score(
            passed=True, explanation=f"no tool call failed{scope.where} ({len(calls)} call(s))"
        )


class WithinBudget:
    """Pass when the steps (and tokens) in scope are within budget (at the budget counts as
    within). Tokens: for the whole transcript, as ``step-efficiency`` counts them (the
    record's usage, else its model steps'); for one turn, its ``llm_call`` and ``embedding``
    steps'. A scope without token usage while ``max_tokens`` is set is SKIPPED.

    Args:
        max_steps: the most steps allowed.
        max_tokens: the most tokens allowed.
        turn: a turn number (1-based), ``last`` or ``any`` (default: the whole transcript).
    """

    def __init__(
        self, *, max_steps: int | None = None, max_tokens: int | None = None, turn: Any = "any"
    ) -> None:
        if max_steps is None and max_tokens is None:
            raise ParamError("within-budget: give the param 'max_steps', 'max_tokens' or both")
        check_budgets("within-budget", (("max_steps", max_steps), ("max_tokens", max_tokens)))
        self.max_steps, self.max_tokens = max_steps, max_tokens
        self.turn: Turn = check_turn("within-budget", turn)

    def __call__(self, record: Record) -> Score:
        scope = scope_of(record, self.turn)
        steps = [s for _, s in scope.steps]
        trajectory = record.trajectory
        assert trajectory is not None
        whole = len(scope.turns) == scope.count
        tokens = tokens_of(record, trajectory) if whole else step_tokens(steps)
        if self.max_tokens is not None and tokens is None:
            raise Skip(f"no token usage{scope.where} (max_tokens is set)")
        ok, why = over_budget(
            [
                ("steps", len(steps), self.max_steps),
                ("tokens", float(tokens or 0), self.max_tokens),
            ]
        )
        return Score(passed=ok, explanation=why + scope.where)


def _schema_validator(evaluator: str, schema: dict[str, Any]) -> Validator:
    # jsonschema is imported on bind: it would cost `import evalsi` ~50 ms.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        raise ParamError(
            f"{evaluator}: param 'arguments' is not a valid Draft 2020-12 schema: "
            f"{e.message} (at {e.json_path})"
        ) from None
    # An empty registry: a $ref resolves inside the schema or fails; nothing is fetched.
    return Draft202012Validator(schema, registry=Registry())


def _declare(
    name: str, desc: str, example: str, requires: tuple[str, ...] = ("trajectory",)
) -> Any:
    return builtin("agent", name, passed(name, desc), requires=requires, example=_EXAMPLE + example)


tool_called = _declare(
    "tool-called",
    "the tool was called (with matching arguments)",
    "tool-called --param tool-called.tool=book_flight",
)(ToolCalled)
tool_not_called = _declare(
    "tool-not-called",
    "the tool was never called",
    "tool-not-called --param tool-not-called.tool=delete_account",
)(ToolNotCalled)
tool_order = _declare(
    "tool-order",
    "the tools were called in this order",
    "tool-order --param tool-order.tools=search_flights,book_flight",
)(ToolOrder)
tool_count = _declare(
    "tool-count",
    "the number of calls is within min and max",
    "tool-count --param tool-count.tool=search_flights --param tool-count.max=2",
)(ToolCount)
final_answer = _declare(
    "final-answer",
    "the final answer matches",
    "final-answer --param 'final-answer.regex=[A-Z0-9]{5}'",
    requires=(),
)(FinalAnswer)
no_tool_error = _declare("no-tool-error", "no tool call failed", "no-tool-error")(NoToolError)
within_budget = _declare(
    "within-budget",
    "the steps and tokens are within budget",
    "within-budget --param within-budget.max_steps=6",
)(WithinBudget)
