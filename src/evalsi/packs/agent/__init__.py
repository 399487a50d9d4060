"""The agent pack: metrics over an agent's trajectory, from runs and from traces alike.

Process (no model needed): ``tool-call-accuracy`` (names and arguments against reference
calls), ``trajectory-match`` (strict, unordered, subset or superset), ``loop-detection``
(repeated identical calls). Predicates (pass/fail, turn-scoped, configured by params):
``tool-called``, ``tool-not-called``, ``tool-order``, ``tool-count``, ``final-answer``,
``no-tool-error``, ``within-budget``. Efficiency: ``step-efficiency`` (steps, tokens and
latency against budgets), ``agent-efficiency`` (an agent run's steps, tokens, cost and wall
time against its budgets). Outcome: ``task-success`` (the environment's checks of the end
state), and with a configured judge ``session-goal-completion``. What the harness recorded of
an agent run: ``policy-violations``, ``approval-requests``, ``fault-recovery``. Each is
``builtin/<name>@1.0.0``; the record shape is in ``docs/guides/packs/agent.md``.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.agent._accuracy import tool_call_accuracy
from evalsi.packs.agent._efficiency import agent_efficiency, step_efficiency
from evalsi.packs.agent._environment import approval_requests, fault_recovery, policy_violations
from evalsi.packs.agent._goal import GOAL_TEMPLATE, session_goal_completion
from evalsi.packs.agent._loops import loop_detection
from evalsi.packs.agent._outcome import task_success
from evalsi.packs.agent._predicates import (
    final_answer,
    no_tool_error,
    tool_called,
    tool_count,
    tool_not_called,
    tool_order,
    within_budget,
)
from evalsi.packs.agent._trajectory import trajectory_match

EVALUATORS: tuple[Evaluator, ...] = (
    tool_call_accuracy,
    trajectory_match,
    loop_detection,
    step_efficiency,
    session_goal_completion,
    policy_violations,
    approval_requests,
    fault_recovery,
    tool_called,
    tool_not_called,
    tool_order,
    tool_count,
    final_answer,
    no_tool_error,
    within_budget,
    task_success,
    agent_efficiency,
)
"""Every evaluator of the agent pack."""

TEMPLATES = (GOAL_TEMPLATE,)
"""The versioned prompt templates of the judge-based metrics."""

__all__ = ["EVALUATORS", "TEMPLATES"]
