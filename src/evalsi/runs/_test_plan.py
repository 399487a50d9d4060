"""The test plan a run registers before its first task (``test_plan.json`` in a bundle).

A plan fixes what will be tested before anything is seen: the declaration, which scenarios are
selected and which excluded (and why), the thresholds with their sources, the seeds, the
scenarios' and the environment's hashes, the evaluators and the evaluating code. Its exact
text and sha256 are stored with the run (``RunInfo.spec["test_plan"]``) when the run is
created, so ``evalsi bundle validate`` can show the plan was not edited since.

A run without a declaration registers a plan that says so (``declared: false``); it lists no
scenarios (nothing was promised about them) and a gate cannot judge it. With a declaration the
dataset is read once up front, streaming, to list the scenarios and hash them; past
``MAX_LISTED`` scenarios the plan keeps their count and hash only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.core import UserError, code_sha256, content_hash

if TYPE_CHECKING:
    from evalsi.datasets import Dataset
    from evalsi.specs import CasePolicy, Declaration, Threshold

PLAN_FORMAT = "evalsi-test-plan"
PLAN_VERSION = 1
MAX_LISTED = 100_000
"""Scenarios a plan names one by one; a larger dataset is pinned by its hash and count."""
CATEGORY_KEY = "category"
NOT_DECLARED = (
    "the run declared no system under test (spec.declaration or --declaration): nothing was "
    "promised before the first task, so a gate cannot judge it"
)


@dataclass(frozen=True, slots=True)
class TestPlan:
    """A registered plan: its exact text, the text's sha256, and what the run needs of it."""

    __test__ = False  # not a pytest test class, whatever its name says

    text: str
    sha256: str
    declared: bool
    excluded: frozenset[str] = frozenset()
    """Scenario ids the run leaves out."""

    def document(self) -> dict[str, Any]:
        parsed: dict[str, Any] = orjson.loads(self.text)
        return parsed

    def stored(self) -> dict[str, Any]:
        """As the run's stored spec keeps it."""
        return {"sha256": self.sha256, "text": self.text}

    @classmethod
    def of_text(cls, text: str) -> TestPlan:
        doc = orjson.loads(text)
        excluded = frozenset(str(e["id"]) for e in doc.get("scenarios", {}).get("excluded", ()))
        return cls(text, plan_sha256(text), bool(doc.get("declared")), excluded)

    @classmethod
    def from_stored(cls, spec: Mapping[str, Any]) -> TestPlan | None:
        """The plan a stored run registered (``None`` for a run from before plans)."""
        stored = spec.get("test_plan")
        if not isinstance(stored, Mapping) or not isinstance(stored.get("text"), str):
            return None
        return cls.of_text(stored["text"])


def pass_threshold(metadata: Mapping[str, Any]) -> float | None:
    """A sample's own case pass rate (``metadata.pass_threshold``, 0 to 1), if it sets one."""
    value = metadata.get("pass_threshold")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return None
    return float(value)


def plan_sha256(text: str) -> str:
    return content_hash(text.encode())


def effective_thresholds(
    spec: Sequence[Threshold], declaration: Declaration | None
) -> tuple[Threshold, ...]:
    """The spec's thresholds tightened by the declaration's; a looser declared one is refused."""
    if declaration is None:
        return tuple(spec)
    from evalsi.specs import raise_problems, tightened  # the schema checks: declared runs only

    merged, problems = tightened(spec, declaration.thresholds, ("declaration", "thresholds"), {})
    if problems:
        raise_problems(declaration.source or "<declaration>", {}, problems)
    return merged


def effective_policy(spec: CasePolicy | None, declaration: Declaration | None) -> CasePolicy | None:
    """The spec's case policy, or the declaration's when it asks more; a looser one is refused."""
    if declaration is None or declaration.case_policy is None:
        return spec
    from evalsi.specs import raise_problems, tightened_policy

    policy, problems = tightened_policy(spec, declaration.case_policy, ("casePolicy",), {})
    if problems:
        raise_problems(declaration.source or "<declaration>", {}, problems)
    return policy


def register_plan(
    *,
    kind: str,
    name: str,
    declaration: Declaration | None,
    thresholds: Sequence[Threshold],
    dataset: Dataset,
    evaluators: Sequence[Mapping[str, Any]],
    trials: int,
    seed: int,
    spec_hash: str | None,
    limit: int | None = None,
    environment: Mapping[str, Any] | None = None,
    per_task_seed: str | None = None,
    case_policy: CasePolicy | None = None,
    rates: Mapping[str, float] | None = None,
) -> TestPlan:
    """The plan of a run about to start; with a declaration, ``dataset`` is read once here.

    ``rates``: the run's ``min_completion_rate`` and ``max_evaluator_error_rate``, which a case
    policy's validity checks use."""
    effective = effective_thresholds(thresholds, declaration)
    policy = effective_policy(case_policy, declaration)
    doc: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "declared": declaration is not None,
        "run": {"kind": kind, "name": name, "spec_hash": spec_hash, "trials": trials},
        "declaration": None,
        "scenarios": {"source": dataset.name, "listed": False},
        "environment_sha256": None if environment is None else content_hash(environment),
        "thresholds": [t.to_dict() for t in effective],
        "case_policy": None
        if policy is None
        else {
            **policy.to_dict(),
            "min_completion_rate": (rates or {}).get("min_completion_rate", 0.8),
            "max_evaluator_error_rate": (rates or {}).get("max_evaluator_error_rate", 0.1),
        },
        "seeds": {"seed": seed, "per_task": per_task_seed, "trials": trials},
        "evaluators": [dict(e) for e in evaluators],
        # Hashing the code takes ~20 ms: an undeclared run's start is not slowed for it (its
        # manifest records the hash when it ends).
        "code_sha256": code_sha256() if declaration is not None else None,
        "registered_at": round(time.time(), 3),
    }
    excluded: frozenset[str] = frozenset()
    if declaration is None:
        doc["not_declared"] = NOT_DECLARED
    else:
        doc["declaration"] = declaration.to_dict()
        doc["scenarios"] = _scenarios(dataset, declaration, limit)
        excluded = frozenset(e["id"] for e in doc["scenarios"]["excluded"])
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    return TestPlan(text, plan_sha256(text), declaration is not None, excluded)


def _scenarios(dataset: Dataset, declaration: Declaration, limit: int | None) -> dict[str, Any]:
    """Every scenario the run will and will not run, read in one streaming pass."""
    excluded_ids = declaration.excluded
    selected: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    categories: dict[str, int] = {}
    found: set[str] = set()
    seq = 0
    for batch in dataset.iter_batches(2048):
        for record in batch:
            category = record.metadata.get(CATEGORY_KEY)
            entry: dict[str, Any] = {"id": record.id, "seq": seq}
            if category is not None:
                entry["category"] = str(category)
            threshold = pass_threshold(record.metadata)
            if threshold is not None:
                entry["pass_threshold"] = threshold
            if limit is not None and seq >= limit:
                reason = f"beyond spec.dataset.limit ({limit})"
            elif record.id in excluded_ids:
                reason = excluded_ids[record.id]
                found.add(record.id)
            else:
                reason = ""
                key = str(category) if category is not None else ""
                categories[key] = categories.get(key, 0) + 1
            if reason:
                if len(excluded) < MAX_LISTED:
                    excluded.append({**entry, "reason": reason})
            elif len(selected) < MAX_LISTED:
                selected.append(entry)
            seq += 1
    missing = sorted(set(excluded_ids) - found)
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        raise UserError(
            f"the declaration excludes scenarios the dataset does not hold: {shown}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""),
            hint="exclude names a sample's id (its `id` field)",
        )
    return {
        "source": dataset.name,
        "sha256": dataset.version,
        "count": seq,
        "category_key": CATEGORY_KEY,
        "categories": dict(sorted(categories.items())),
        "listed": seq <= MAX_LISTED,
        "selected": selected,
        "excluded": excluded,
    }


__all__ = [
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "TestPlan",
    "effective_policy",
    "effective_thresholds",
    "pass_threshold",
    "register_plan",
]
