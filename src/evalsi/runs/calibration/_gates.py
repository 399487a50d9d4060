"""Which gates of a stored run lean on a judge nobody has calibrated: the report's warning.

A gate on a judge evaluator's metric is only as trustworthy as the judge. For each gate, the
judge evaluators it reads are found from its ``metric('NAME'...)`` calls; the judge's identity
and prompt template's hash come from the run's own stored scores (what was really asked), and
the evaluator's ref and params from the run's spec. Without a calibration under that key
(``store.CalibrationKey``) the gate gets a warning that says how to make one.
"""

from __future__ import annotations

import re
from typing import Any

from evalsi.core import Outcome
from evalsi.store import CalibrationKey, RunInfo, SqlStore, latest_calibration

_METRIC_CALL = re.compile(r"""metric\(\s*[rRbB]{0,2}(?:'''|\"\"\"|'|")([^'"/]+)""")


def gate_evaluators(expr: str) -> list[str]:
    """The evaluator instance names a gate's ``metric(...)`` calls read, in order, once each.

    Example:
        >>> gate_evaluators("metric('llm-judge').mean >= 0.8 && metric('em/em').n > 5")
        ['llm-judge', 'em']
    """
    return list(dict.fromkeys(m.strip() for m in _METRIC_CALL.findall(expr)))


def _judge_metadata(db: SqlStore, run_id: str, index: int) -> dict[str, Any] | None:
    """The judge metadata of the evaluator's first scored result, or None (not a judge)."""
    results = db.iter_results(run_id, evaluator=index, outcome=Outcome.SCORED)
    first = next(results, None)
    getattr(results, "close", lambda: None)()  # release the query's connection now
    if first is None or not first[2].scores:
        return None
    meta = first[2].scores[0].metadata
    if isinstance(meta.get("judge_identity"), dict) and meta.get("template_hash"):
        return meta
    return None


def uncalibrated_gates(db: SqlStore, run: RunInfo) -> list[str]:
    """One warning per (gate, judge evaluator it reads) with no calibration in the store."""
    gates = [g for g in (run.summary or {}).get("gates") or [] if isinstance(g, dict)]
    if not gates:
        return []
    specs = {str(s.get("name")): (i, s) for i, s in enumerate(run.evaluators)}
    found: dict[str, dict[str, Any] | None] = {}
    warnings = []
    for gate in gates:
        expr = str(gate.get("expr", ""))
        for name in gate_evaluators(expr):
            if name not in specs:
                continue
            index, spec = specs[name]
            if name not in found:
                found[name] = _judge_metadata(db, run.id, index)
            meta = found[name]
            if meta is None:
                continue
            ref = str(spec.get("ref", ""))
            params = dict(spec.get("params") or {})
            key = CalibrationKey.of(meta["judge_identity"], ref, meta["template_hash"], params)
            if latest_calibration(db, key, project_id=run.project_id) is None:
                warnings.append(_warning(expr, name, ref, meta))
    return warnings


def _warning(expr: str, name: str, ref: str, meta: dict[str, Any]) -> str:
    identity = meta["judge_identity"]
    judge = str(meta.get("judge") or identity.get("name") or "default")
    model = identity.get("model")
    about = f" (model {model})" if model else ""
    short = ref.split("@", 1)[0].rsplit("/", 1)[-1] or name
    return (
        f"gate `{expr}` depends on judge {judge!r}{about} through {name}, which is not "
        f"calibrated for this judge, prompt template ({meta.get('template', '?')}) and params: "
        f"run `evalsi calibrate --judge {short} --labels LABELS.jsonl --judges JUDGES.yaml` "
        "with the same params (docs/guides/calibration.md)"
    )


__all__ = ["gate_evaluators", "uncalibrated_gates"]
