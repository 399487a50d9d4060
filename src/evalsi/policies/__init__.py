"""Online evaluation policies: which completed traces to grade, how, and what to do with the scores.

A policy spec (YAML, checked against its schema and its CEL conditions) selects traces, samples
them by trace id, grades them through a cascade of evaluators, keeps the scores under the
policy's ``watch`` run, updates windows, sends alerts and promotes records to datasets. The
engine is handed each completed trace by the server; it never reads spans itself.
"""

from __future__ import annotations

from evalsi.policies._engine import PolicyEngine
from evalsi.policies._live import AppliedPolicy, PolicyStats
from evalsi.policies._promote_traces import TraceSelector, promote_traces
from evalsi.policies._sampling import result_key
from evalsi.policies._spec import PolicySpec, load_policy, policy_from_dict, policy_from_yaml

__all__ = [
    "AppliedPolicy",
    "PolicyEngine",
    "PolicySpec",
    "PolicyStats",
    "TraceSelector",
    "load_policy",
    "policy_from_dict",
    "policy_from_yaml",
    "promote_traces",
    "result_key",
]
