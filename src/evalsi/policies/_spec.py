"""Load an ``OnlineEvalPolicy`` spec into a ``PolicySpec``: parse, validate, check, bind.

The same three steps as an ``EvalRun``, with the helpers of ``evalsi.specs``,
with every problem reported at once as ``policy.yaml:12: spec.cascade[2].when: ...``:

1. the YAML is parsed with the line of every key (``evalsi.specs``);
2. the document is validated against ``schemas/onlineevalpolicy.schema.json``, generated from
   ``proto/evalsi/v1alpha1/policy.proto`` (unknown fields are named, with the closest known);
3. what a schema cannot say is checked here: the CEL conditions (``_cel``), durations,
   webhook URLs, the dataset name, the project label, and the cascade's evaluators, which are
   resolved in the registry and bound with their params (record scope, or dataset scope in the
   cascade: a corpus metric over the window's traces), so a policy that loads is a policy that
   runs.
"""

from __future__ import annotations

import copy
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalsi.core import Scope, SpecError, UserError, content_hash
from evalsi.evaluators import BoundEvaluator, PackOptIn, Registry
from evalsi.policies._cel import (
    ConditionError,
    compile_condition,
    scores_vocabulary,
    trace_vocabulary,
    window_vocabulary,
)
from evalsi.runs import JudgeSpec, judges_from_doc
from evalsi.sinks import TRACE_SINK_KINDS
from evalsi.specs import (
    MAX_SPEC_BYTES,
    NAME,
    KeyPath,
    Problem,
    SinkSpec,
    check_plain,
    line_of,
    parse_duration,
    parse_yaml,
    raise_problems,
    read_spec_text,
    schema_problems,
    show,
    sink_entry,
    where,
)
from evalsi.store import DEFAULT_PROJECT, check_project_id

if TYPE_CHECKING:
    import cel

KIND = "OnlineEvalPolicy"
PROJECT_LABEL = "evals.si/project"
DEFAULT_WINDOW_S = 300.0
MAX_WINDOW_S = 24 * 3600.0
MIN_WINDOW_S = 1.0
DATASET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
# One character that is not a space or a slash, then any non-space: the same URLs as
# ``[^\s/]+\S*``, whose overlapping quantifiers took 18 s on a 40,000-character host.
_URL = re.compile(r"https?://[^\s/]\S*")


def _host_and_port_ok(url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError past 65535 or when not a number
    except ValueError:
        return False
    return bool(parts.hostname)


_LATENCY = re.compile(r"\s*latency\s*>\s*p(\d+(?:\.\d+)?)\s*")
FEEDBACK_NEGATIVE = "feedback.negative"


@dataclass(frozen=True)
class Step:
    """One evaluator of a cascade: bound, with its optional ``when`` compiled."""

    ref: str
    name: str
    params: dict[str, Any]
    when: str
    bound: BoundEvaluator = field(compare=False, repr=False)
    program: cel.Program | None = field(default=None, compare=False, repr=False)

    @property
    def corpus(self) -> bool:
        """A dataset-scope step: it grades the window's traces together (``_corpus``)."""
        return self.bound.scope is Scope.DATASET


@dataclass(frozen=True)
class AlwaysRule:
    """An ``always`` rule: feedback, a latency percentile, or a CEL condition."""

    text: str
    kind: Literal["feedback", "latency", "cel"]
    quantile: float = 0.0  # latency: 0.99 for p99
    program: cel.Program | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class AlertSpec:
    name: str
    when: str
    notify: str
    cooldown_s: float = 0.0
    program: cel.Program | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PromoteSpec:
    when: str
    dataset: str
    program: cel.Program | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PolicySpec:
    """A loaded, checked policy. ``raw`` is the document as given (proto3 JSON form) and
    ``spec_hash`` its content hash with the project: the identity of this version."""

    name: str
    project: str
    selector: str
    rate: float
    always: tuple[AlwaysRule, ...]
    cascade: tuple[Step, ...]
    on_feedback: tuple[Step, ...]
    window_s: float
    alerts: tuple[AlertSpec, ...]
    promote: PromoteSpec | None
    judges: dict[str, JudgeSpec]
    labels: dict[str, str]
    raw: dict[str, Any] = field(compare=False, repr=False)
    sinks: tuple[SinkSpec, ...] = ()
    spec_hash: str = ""
    selector_program: cel.Program | None = field(default=None, compare=False, repr=False)

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every evaluator instance: the cascade, then the feedback steps (store order)."""
        return (*self.cascade, *self.on_feedback)

    @property
    def feedback_forces(self) -> bool:
        return any(r.kind == "feedback" for r in self.always)


# -- entry points ---------------------------------------------------------------------------------


def load_policy(
    path: str | Path,
    *,
    registry: Registry,
    packs: PackOptIn | None = None,
    project: str = "",
) -> PolicySpec:
    """Read and check an ``OnlineEvalPolicy`` YAML file.

    Example:
        >>> from evalsi.packs import builtin_registry
        >>> load_policy("no/such/policy.yaml", registry=builtin_registry())
        Traceback (most recent call last):
        ...
        evalsi.core._errors.SpecError: no/such/policy.yaml: cannot read the policy file (not found)
    """
    shown = str(path)
    text = read_spec_text(Path(path), shown, "policy")
    return policy_from_yaml(text, source=shown, registry=registry, packs=packs, project=project)


def policy_from_yaml(
    text: str,
    *,
    source: str = "",
    registry: Registry,
    packs: PackOptIn | None = None,
    project: str = "",
) -> PolicySpec:
    """Like ``load_policy`` for YAML (or JSON) text; ``source`` names it in errors."""
    shown = source or "<policy>"
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"{shown}: the policy is larger than {MAX_SPEC_BYTES} bytes")
    doc, lines = parse_yaml(text, shown)
    return _build(doc, lines, shown, registry, packs, project)


def policy_from_dict(
    doc: Mapping[str, Any],
    *,
    source: str = "",
    registry: Registry,
    packs: PackOptIn | None = None,
    project: str = "",
) -> PolicySpec:
    """Check a policy given as data (the YAML document as Python values, proto3 JSON form).

    ``project`` applies when the policy's labels name none.
    """
    shown = source or "<policy>"
    check_plain(doc, (), shown, {})
    return _build(copy.deepcopy(dict(doc)), {}, shown, registry, packs, project)


# -- checking -------------------------------------------------------------------------------------


def _build(
    doc: Any,
    lines: dict[KeyPath, int],
    shown: str,
    registry: Registry,
    packs: PackOptIn | None,
    project: str,
) -> PolicySpec:
    if isinstance(doc, Mapping) and doc.get("kind") not in (None, KIND):
        raise SpecError(
            where(shown, lines, ("kind",)) + f"expected {KIND!r}, got {show(doc.get('kind'))}",
            hint="`evalsi watch` applies OnlineEvalPolicy specs; `evalsi run` takes EvalRun",
        )
    problems = schema_problems("onlineevalpolicy", doc, lines)
    if not problems:
        builder = _PolicyBuilder(doc, lines, registry, packs or PackOptIn(), project)
        spec = builder.build()
        if spec is not None:
            return spec
        problems = builder.problems
    raise_problems(shown, lines, problems)
    raise AssertionError("unreachable")  # raise_problems always raises


class _PolicyBuilder:
    """Turns a schema-valid document into a ``PolicySpec``, collecting what is still wrong."""

    def __init__(
        self,
        doc: dict[str, Any],
        lines: Mapping[KeyPath, int],
        registry: Registry,
        packs: PackOptIn,
        project: str,
    ) -> None:
        self.doc = doc
        self.lines = lines
        self.registry = registry
        self.packs = packs
        self.project = project
        self.problems: list[Problem] = []

    def bad(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(line_of(self.lines, path), path, message))

    def build(self) -> PolicySpec | None:
        meta, spec = self.doc["metadata"], self.doc["spec"]
        name = meta["name"]
        if not NAME.fullmatch(name):
            self.bad(
                ("metadata", "name"),
                "expected a DNS-1123 name (lower-case letters, digits, '-' and '.', starting "
                f"and ending with a letter or digit), got {show(name)}",
            )
        labels = dict(meta.get("labels", {}))
        project = labels.get(PROJECT_LABEL) or self.project or DEFAULT_PROJECT
        try:
            check_project_id(project)
        except UserError as e:
            self.bad(("metadata", "labels", PROJECT_LABEL), e.message)
        selector = spec.get("selector", "")
        selector_program = self.condition(("spec", "selector"), selector, trace_vocabulary())
        sampling = spec.get("sampling", {})
        rate = float(sampling.get("rate", 1.0))
        always = tuple(
            r
            for i, text in enumerate(sampling.get("always", []))
            if (r := self.always(("spec", "sampling", "always", i), text)) is not None
        )
        cascade = self.steps("cascade", spec["cascade"], [])
        on_feedback = self.steps(
            "onFeedback", spec.get("onFeedback", []), [s.name for s in cascade]
        )
        self.unique_names([*cascade, *on_feedback])
        names = [s.name for s in (*cascade, *on_feedback)]
        per_trace = [s.name for s in (*cascade, *on_feedback) if not s.corpus]
        window_s = self.duration(("spec", "window"), spec.get("window", ""), DEFAULT_WINDOW_S)
        if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
            self.bad(("spec", "window"), "expected a window from 1s to 24h")
        alerts = tuple(
            a
            for i, alert in enumerate(spec.get("alerts", []))
            if (a := self.alert(i, alert, names)) is not None
        )
        taken: set[str] = set()
        for i, alert_spec in enumerate(alerts):  # an alert's state (firing, cooldown) is by name
            if alert_spec.name in taken:
                self.bad(
                    ("spec", "alerts", i, "name"),
                    f"alert name {alert_spec.name!r} is used twice (unnamed alerts are "
                    f"alert-<index>); give each alert a distinct name",
                )
            taken.add(alert_spec.name)
        promote = self.promote(spec["promote"], per_trace) if "promote" in spec else None
        judges, judge_problems = judges_from_doc(self.doc, self.lines)
        self.problems.extend(judge_problems)
        sinks = tuple(self.sink(i, entry) for i, entry in enumerate(spec.get("sinks", [])))
        if self.problems:
            return None
        return PolicySpec(
            name=name,
            project=project,
            selector=selector,
            rate=rate,
            always=always,
            cascade=tuple(cascade),
            on_feedback=tuple(on_feedback),
            window_s=window_s,
            alerts=alerts,
            promote=promote,
            judges=judges,
            labels=labels,
            raw=self.doc,
            sinks=sinks,
            spec_hash=content_hash({"project": project, "policy": self.doc}),
            selector_program=selector_program,
        )

    def condition(
        self, at: KeyPath, expr: str, vocabulary: Any, names: Sequence[str] = ()
    ) -> cel.Program | None:
        if not expr:
            return None
        try:
            return compile_condition(expr, vocabulary, names)
        except ConditionError as e:
            self.bad(at, str(e))
            return None

    def always(self, at: KeyPath, text: str) -> AlwaysRule | None:
        if text.strip() == FEEDBACK_NEGATIVE:
            return AlwaysRule(text, "feedback")
        m = _LATENCY.fullmatch(text)
        if m is not None:
            percentile = float(m[1])
            if not 0 < percentile < 100:
                self.bad(at, f"expected a percentile between p1 and p99.9, got p{m[1]}")
                return None
            return AlwaysRule(text, "latency", quantile=percentile / 100)
        program = self.condition(at, text, trace_vocabulary())
        if program is None:
            if not any(p.path == at for p in self.problems):
                self.bad(at, "expected a condition")
            return None
        return AlwaysRule(text, "cel", program=program)

    def steps(self, key: str, items: list[dict[str, Any]], before: list[str]) -> list[Step]:
        out: list[Step] = []
        seen = list(before)
        for i, item in enumerate(items):
            at: KeyPath = ("spec", key, i)
            step = self.step(at, item, seen, corpus_ok=key == "cascade")
            if step is not None:
                out.append(step)
                if not step.corpus:  # a corpus metric has no score per trace to read
                    seen.append(step.name)
        return out

    def step(
        self, at: KeyPath, item: dict[str, Any], before: list[str], *, corpus_ok: bool
    ) -> Step | None:
        ref, params = item["ref"], dict(item.get("params", {}))
        try:
            ev = self.registry.resolve(ref)
            self.packs.check(ev, explicit=True, where=f"{'.'.join(map(str, at))}.ref")
            bound = ev.bind(params, alias=item.get("name") or ev.name)
        except UserError as e:
            field_at = (*at, "params") if "param" in type(e).__name__.lower() else (*at, "ref")
            hint = f" ({e.hint})" if e.hint else ""
            self.bad(field_at, f"{e.message}{hint}")
            return None
        if bound.scope is Scope.DATASET and not corpus_ok:
            self.bad(
                (*at, "ref"),
                f"{ev.name} is a dataset-scope evaluator; onFeedback grades one trace at a time "
                "(put it in the cascade, where it grades the window's traces together)",
            )
            return None
        if bound.scope not in (Scope.RECORD, Scope.DATASET):
            self.bad(
                (*at, "ref"),
                f"{ev.name} is a {bound.scope.value}-scope evaluator; a cascade takes "
                "record-scope evaluators (one trace) and dataset-scope ones (the window's traces)",
            )
            return None
        when = item.get("when", "")
        program = self.condition((*at, "when"), when, scores_vocabulary(), before)
        return Step(ref, bound.name, params, when, bound, program)

    def unique_names(self, steps: list[Step]) -> None:
        seen: set[str] = set()
        for step in steps:
            if step.name in seen:
                self.bad(
                    ("spec",),
                    f"evaluator instance {step.name!r} appears twice; give one a distinct name",
                )
            seen.add(step.name)

    def duration(self, at: KeyPath, text: str, default: float) -> float:
        if not text:
            return default
        seconds = parse_duration(text)
        if not seconds:
            self.bad(at, f"expected a duration such as 5m, 1h or 90s, got {show(text)}")
            return default
        return seconds

    def alert(self, i: int, alert: dict[str, Any], names: list[str]) -> AlertSpec | None:
        at: KeyPath = ("spec", "alerts", i)
        notify = alert["notify"]
        if not _URL.fullmatch(notify) or not _host_and_port_ok(notify):
            self.bad(
                (*at, "notify"),
                f"expected an http:// or https:// webhook URL, got {show(notify)} (for Slack, "
                "use its incoming-webhook https URL)",
            )
        cooldown = self.duration((*at, "cooldown"), alert.get("cooldown", ""), 0.0)
        program = self.condition((*at, "when"), alert["when"], window_vocabulary(), names)
        if program is None:
            return None
        name = alert.get("name") or f"alert-{i}"
        return AlertSpec(name, alert["when"], notify, cooldown, program)

    def sink(self, i: int, entry: dict[str, Any]) -> SinkSpec:
        sink = sink_entry(entry)
        if sink.kind not in TRACE_SINK_KINDS:
            self.bad(
                ("spec", "sinks", i, sink.kind),
                f"a policy's scores go to a tool that keeps traces ("
                f"{', '.join(TRACE_SINK_KINDS)}); {sink.kind} keeps runs: send the policy's "
                f"watch run there with `evalsi export RUN --to`",
            )
        return sink

    def promote(self, promote: dict[str, Any], names: list[str]) -> PromoteSpec | None:
        at: KeyPath = ("spec", "promote")
        dataset = promote["dataset"]
        if not DATASET_NAME.fullmatch(dataset):
            self.bad(
                (*at, "dataset"),
                f"expected a dataset name (1-128 lower-case letters, digits, '.', '_' or '-'), "
                f"got {show(dataset)}",
            )
        program = self.condition((*at, "when"), promote["when"], scores_vocabulary(), names)
        if program is None:
            return None
        return PromoteSpec(promote["when"], dataset, program)
