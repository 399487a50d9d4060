"""``report.md``: the bundle for a person — what was planned, what happened, how it was judged.

Rendered only from what the bundle itself holds (the plan, the summary, the gates), so anyone
can render it again from the bundle and get the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _rate(r: Mapping[str, Any]) -> str:
    text = f"{_num(r.get('value'))} ({r.get('numerator')}/{r.get('denominator')})"
    excluded = r.get("exclusions") or {}
    if excluded:
        text += " excl. " + ", ".join(f"{k} {v}" for k, v in excluded.items())
    return text


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return out


def render_report(
    plan: Mapping[str, Any], summary: Mapping[str, Any], gates: Mapping[str, Any], info: Any
) -> str:
    """The Markdown report of a bundle."""
    lines = [f"# Evidence bundle: run {summary['run_id']}", ""]
    lines.append(f"- Run: {info.name or '(unnamed)'} ({info.kind}), status **{summary['status']}**")
    lines.append(
        f"- Tasks: {summary['tasks']} ({summary['records']} scenarios x up to "
        f"{summary['trials']} trials)"
    )
    if summary.get("stopped_reason"):
        lines.append(f"- Stopped: {summary['stopped_reason']}")
    if summary.get("external"):
        lines.append(
            "- **Verdicts computed outside evalsi** (ingested): evalsi stored them as they came "
            "and cannot derive them again"
        )
    lines += ["", "## Test plan", ""]
    if plan.get("declared"):
        decl = plan.get("declaration") or {}
        system = decl.get("system") or {}
        lines.append(f"- System under test: {system.get('name', '?')} {system.get('version', '')}")
        if decl.get("human_involvement"):
            lines.append(f"- Human involvement: {decl['human_involvement']}")
        for use in decl.get("intended_use") or ():
            lines.append(f"- Intended use: {use}")
        for use in decl.get("out_of_scope_use") or ():
            lines.append(f"- Out of scope: {use}")
        tools = decl.get("tools") or []
        if tools:
            lines += ["", "Declared tools:", ""]
            lines += _table(
                ("tool", "permission", "data class", "reversibility", "exposure"),
                [
                    (
                        t.get("name"),
                        t.get("permission"),
                        t.get("dataClass", ""),
                        t.get("reversibility", ""),
                        t.get("exposure", ""),
                    )
                    for t in tools
                ],
            )
        scenarios = plan.get("scenarios") or {}
        lines += [
            "",
            f"- Scenarios: {len(scenarios.get('selected') or ())} selected, "
            f"{len(scenarios.get('excluded') or ())} excluded (data {scenarios.get('sha256')})",
        ]
        for e in (scenarios.get("excluded") or [])[:20]:
            lines.append(f"  - excluded {e.get('id')}: {e.get('reason')}")
    else:
        lines.append(f"Not declared: {plan.get('not_declared', 'no declaration')}")
    thresholds = plan.get("thresholds") or []
    if thresholds:
        lines += ["", "Thresholds (registered before the first task):", ""]
        lines += _table(
            ("category", "metric", "statistic", "bound", "kind", "source"),
            [
                (
                    t.get("category") or "(all)",
                    t.get("metric") or "(tasks)",
                    t.get("statistic"),
                    (">= " + _num(t["min"])) if "min" in t else ("<= " + _num(t.get("max"))),
                    t.get("kind"),
                    t.get("source"),
                )
                for t in thresholds
            ],
        )
    lines += ["", "## Metrics", ""]
    lines += _table(
        ("evaluator", "metric", "n", "mean", "95% CI", "method", "skipped", "errors"),
        [
            (
                m.get("evaluator"),
                m.get("metric"),
                m.get("n"),
                _num(m.get("mean")),
                "[" + ", ".join(_num(c) for c in (m.get("ci") or [None, None])) + "]",
                m.get("ci_method", ""),
                m.get("skipped", 0),
                m.get("errors", 0),
            )
            for m in summary.get("metrics") or ()
        ],
    )
    lines += ["", "## Scenarios by category", ""]
    rows = [*(summary.get("categories") or ()), summary.get("overall") or {}]
    lines += _table(
        ("category", "scenarios", "complete", "pass^k", "pass rate", "flaky"),
        [
            (
                c.get("category") or "(all)",
                c.get("scenarios"),
                c.get("complete"),
                _rate(c.get("pass_hat_k") or {}),
                _rate(c.get("pass_rate") or {}),
                c.get("flaky"),
            )
            for c in rows
            if c
        ],
    )
    overall = summary.get("overall") or {}
    if overall.get("not_evaluated"):
        lines += ["", "Not fully evaluated: " + ", ".join(overall["not_evaluated"])]
    if overall.get("flaky_ids"):
        lines += ["", "Flaky: " + ", ".join(overall["flaky_ids"])]
    run_gates = gates.get("gates") or []
    if run_gates:
        lines += ["", "## The run's gates", ""]
        lines += _table(
            ("gate", "passed", "value"),
            [(g.get("expr"), g.get("passed"), _num(g.get("value"))) for g in run_gates],
        )
    lines += [
        "",
        "Check this bundle with `evalsi bundle validate DIR`, judge it with `evalsi gate "
        "--bundle DIR`, and derive its verdicts again with `evalsi rescore DIR`.",
        "",
    ]
    return "\n".join(lines)


__all__ = ["render_report"]
