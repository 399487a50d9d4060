"""Spec files (``EvalRun``, ``OnlineEvalPolicy``): YAML with the line of every key, the JSON
Schemas generated from the proto, and errors that name the line, the field and what was
expected; and the ``EvalRun`` itself: ``RunSpec`` and its loader. A policy's checks live with
the policies (they bind evaluators)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.specs._agent_kinds import (
        AGENT_KINDS,
        CONNECTOR_KINDS,
        A2aAgentSpec,
        AgentKind,
        CliAgentSpec,
        GitWorkspaceSpec,
        HttpAgentSpec,
        McpAgentSpec,
        ResponsesAgentSpec,
        UserSimulatorSpec,
    )
    from evalsi.specs._checks import (
        MAX_SPEC_BYTES,
        NAME,
        Problem,
        parse_duration,
        raise_problems,
        read_spec_text,
        schema_problems,
        show,
    )
    from evalsi.specs._declaration import CasePolicy, Declaration, Threshold
    from evalsi.specs._declaration_load import load_declaration, tightened, tightened_policy
    from evalsi.specs._evalrun import (
        AgentSpec,
        BudgetSpec,
        CheckerSpec,
        DatasetSpec,
        EnvironmentSpec,
        EvaluatorEntry,
        HarnessSpec,
        JudgeSpec,
        RunSpec,
        SandboxSettingsSpec,
        SinkSpec,
        TargetSpec,
        TelemetrySpec,
        ToolDeclarationSpec,
        ToolEntrySpec,
        fixture_problem,
        with_declaration,
        work_document,
    )
    from evalsi.specs._evalrun_load import (
        TARGET_KINDS,
        judges_from_doc,
        load_run_spec,
        run_spec_from_dict,
        run_spec_from_yaml,
    )
    from evalsi.specs._sinks import TO_FORMS, load_sinks, sink_entry, sink_of, sinks_from
    from evalsi.specs._yaml import KeyPath, check_plain, line_of, parse_yaml, where

__all__ = [
    "AGENT_KINDS",
    "CONNECTOR_KINDS",
    "MAX_SPEC_BYTES",
    "NAME",
    "TARGET_KINDS",
    "TO_FORMS",
    "A2aAgentSpec",
    "AgentKind",
    "AgentSpec",
    "BudgetSpec",
    "CasePolicy",
    "CheckerSpec",
    "CliAgentSpec",
    "DatasetSpec",
    "Declaration",
    "EnvironmentSpec",
    "EvaluatorEntry",
    "GitWorkspaceSpec",
    "HarnessSpec",
    "HttpAgentSpec",
    "JudgeSpec",
    "KeyPath",
    "McpAgentSpec",
    "Problem",
    "ResponsesAgentSpec",
    "RunSpec",
    "SandboxSettingsSpec",
    "SinkSpec",
    "TargetSpec",
    "TelemetrySpec",
    "Threshold",
    "ToolDeclarationSpec",
    "ToolEntrySpec",
    "UserSimulatorSpec",
    "check_plain",
    "fixture_problem",
    "judges_from_doc",
    "line_of",
    "load_declaration",
    "load_run_spec",
    "load_sinks",
    "parse_duration",
    "parse_yaml",
    "raise_problems",
    "read_spec_text",
    "run_spec_from_dict",
    "run_spec_from_yaml",
    "schema_problems",
    "show",
    "sink_entry",
    "sink_of",
    "sinks_from",
    "tightened",
    "tightened_policy",
    "where",
    "with_declaration",
    "work_document",
]

# Imported on first use (core/_lazy.py): `evalsi eval` reads no spec and loads no jsonschema.
__getattr__ = lazy_exports(__name__, __file__)
