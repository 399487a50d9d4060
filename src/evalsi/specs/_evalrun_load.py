"""Load an ``EvalRun`` spec (YAML) into a ``RunSpec``: parse, validate, check, resolve.

Three steps, each reporting every problem it finds in one ``SpecError`` whose lines read
``run.yaml:12: spec.target.model.baseUrl: expected ...``:

1. ``_yaml`` parses the YAML, remembering the line of every key and list item (and
   refusing duplicate keys, alias bombs and values proto3 JSON cannot hold).
2. The document is validated against ``schemas/evalrun.schema.json``, which
   ``scripts/gen_schema.py`` generates from ``proto/evalsi/v1alpha1/run.proto``; nothing here
   re-declares which fields exist. An unknown field is named with the closest known one.
3. What a schema says poorly is checked here: exactly one target kind, ``module:function``
   references, ``env:``/``file:`` secret references (never echoed: a pasted key must not land in
   a log), durations, names, templates, and the dataset path, resolved against the spec file's
   directory and required to exist (unless ``hf://``).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsi.core import UserError, expand_home
from evalsi.specs._checks import (
    NAME,
    Problem,
    parse_duration,
    raise_problems,
    read_spec_text,
    schema_problems,
    show,
    unknown_field,
)
from evalsi.specs._declaration_load import (
    case_policy_from,
    declaration_from,
    thresholds_from,
    tightened,
    tightened_policy,
)
from evalsi.specs._evalrun import (
    AgentSpec,
    BudgetSpec,
    DatasetSpec,
    EvaluatorEntry,
    JudgeSpec,
    RunSpec,
    SinkSpec,
    TargetKind,
    TargetSpec,
    TelemetrySpec,
)
from evalsi.specs._evalrun_agent import PY_REF as _PY_REF
from evalsi.specs._evalrun_agent import URL as _URL
from evalsi.specs._evalrun_agent import AgentKeys
from evalsi.specs._sinks import sink_entry
from evalsi.specs._yaml import KeyPath, check_plain, line_of, parse_yaml

DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_TIMEOUT_S = 60.0
TARGET_KINDS = ("model", "python", "http", "agent")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def load_run_spec(path: str | Path) -> RunSpec:
    """Read, validate and resolve an ``EvalRun`` YAML file.

    Relative dataset paths (and ``file:`` secret references) are resolved against the spec
    file's directory. ``RunSpec.source`` is the file's absolute path and ``raw`` the document.

    Example:
        >>> load_run_spec("no/such/run.yaml")
        Traceback (most recent call last):
        ...
        evalsi.core._errors.SpecError: no/such/run.yaml: cannot read the spec file (not found)
    """
    shown = str(path)
    file = Path(path)
    text = read_spec_text(file, shown)
    resolved = file.resolve()
    doc, lines = parse_yaml(text, shown)
    return _build(doc, lines, shown, resolved.parent, str(resolved))


def run_spec_from_yaml(
    text: str, *, source: str = "", base_dir: str | Path | None = None
) -> RunSpec:
    """Like ``load_run_spec`` for YAML text in memory; ``source`` names it in errors.

    ``base_dir`` is where relative paths start: by default ``source``'s directory when a source
    is given, else the current directory.
    """
    shown = source or "<spec>"
    doc, lines = parse_yaml(text, shown)
    return _build(doc, lines, shown, base_dir, source)


def run_spec_from_dict(
    doc: Mapping[str, Any], *, source: str = "", base_dir: str | Path | None = None
) -> RunSpec:
    """Validate and resolve a spec given as data (the YAML document as Python values).

    ``base_dir`` is where relative paths start: by default ``source``'s directory when a source
    is given, else the current directory.

    Example:
        >>> run_spec_from_dict({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun"})
        Traceback (most recent call last):
        ...
        evalsi.core._errors.SpecError: <spec>: missing required field 'metadata'
        <spec>: missing required field 'spec'
    """
    shown = source or "<spec>"
    check_plain(doc, (), shown, {})
    return _build(copy.deepcopy(doc), {}, shown, base_dir, source)


# --- validation ------------------------------------------------------------------------------


def _build(
    doc: Any, lines: dict[KeyPath, int], shown: str, base_dir: str | Path | None, source: str
) -> RunSpec:
    problems = [_named_variant(p) for p in schema_problems("evalrun", doc, lines)]
    if not problems:
        if base_dir is None:
            base_dir = Path(source).resolve().parent if source else Path.cwd()
        builder = _SpecBuilder(doc, lines, Path(base_dir))
        spec = builder.build(source)
        if spec is not None:
            return spec
        problems = builder.problems
    raise_problems(shown, lines, problems)
    raise AssertionError("unreachable")  # raise_problems always raises


def _named_variant(p: Problem) -> Problem:
    """The agent's model names what to play when its connector is scripted: say so."""
    if p.path[-2:] == ("agent", "model") and p.message == "missing required field 'model'":
        return dataclasses.replace(
            p,
            message=p.message + " (the model's name; for connector scripted, the known "
            "trajectory of each sample to play, metadata.known.<model>, e.g. good)",
        )
    return p


# --- semantic checks and the RunSpec -----------------------------------------------------------


def judges_from_doc(
    doc: dict[str, Any], lines: Mapping[KeyPath, int]
) -> tuple[dict[str, JudgeSpec], list[Problem]]:
    """The schema-valid ``spec.judges`` of any spec kind (a policy has them too), checked as an
    ``EvalRun``'s are: the judges by name, and what is wrong with them."""
    builder = _SpecBuilder(doc, lines, Path.cwd())
    judges = {
        name: builder.judge(name, j) for name, j in sorted(doc["spec"].get("judges", {}).items())
    }
    return judges, builder.problems


class _SpecBuilder(AgentKeys):
    """Turns a schema-valid document into a ``RunSpec``, collecting what is still wrong."""

    def __init__(self, doc: dict[str, Any], lines: Mapping[KeyPath, int], base_dir: Path) -> None:
        self.doc = doc
        self.lines = lines
        self.base_dir = base_dir
        self.problems: list[Problem] = []

    def bad(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(line_of(self.lines, path), path, message))

    def build(self, source: str) -> RunSpec | None:
        meta, spec = self.doc["metadata"], self.doc["spec"]
        name = meta["name"]
        if not NAME.fullmatch(name):
            self.bad(
                ("metadata", "name"),
                f"expected a DNS-1123 name (lower-case letters, digits, '-' and '.', starting "
                f"and ending with a letter or digit), got {show(name)}",
            )
        target = self.target(spec["target"])
        dataset = self.dataset(spec["dataset"])
        evaluators = self.evaluators(spec["evaluators"])
        budget = self.budget(spec["budget"]) if "budget" in spec else None
        telemetry = self.telemetry(spec["telemetry"]) if "telemetry" in spec else None
        sinks = tuple(self.sink(i, x) for i, x in enumerate(spec.get("sinks", ())))
        judges = {name: self.judge(name, j) for name, j in sorted(spec.get("judges", {}).items())}
        thresholds, problems = thresholds_from(
            spec.get("thresholds", ()), ("spec", "thresholds"), self.lines, source="spec"
        )
        self.problems.extend(problems)
        declaration = None
        if "declaration" in spec:
            at: KeyPath = ("spec", "declaration")
            declaration, problems = declaration_from(spec["declaration"], at, self.lines)
            self.problems.extend(problems)
            if declaration is not None:
                _, problems = tightened(
                    thresholds, declaration.thresholds, (*at, "thresholds"), self.lines
                )
                self.problems.extend(problems)
                _, problems = tightened_policy(
                    case_policy_from(spec.get("casePolicy")),
                    declaration.case_policy,
                    (*at, "casePolicy"),
                    self.lines,
                )
                self.problems.extend(problems)
        environment = None
        if "environment" in spec:
            environment = self.environment(spec["environment"])
            if target is not None and target.kind != "agent":
                self.bad(("spec", "environment"), "only an agent target (target.agent) calls tools")
        builtin = (
            target is not None
            and target.agent is not None
            and target.agent.kind == "builtin"
            and target.agent.harness is None
        )
        if builtin and (environment is None or not environment.tools):
            at = ("spec", "environment") if environment is not None else ("spec", "target", "agent")
            self.bad(at, "the built-in agent needs spec.environment.tools (at least one)")
        if self.problems or target is None or dataset is None:
            return None
        return RunSpec(
            name=name,
            target=target,
            dataset=dataset,
            evaluators=evaluators,
            trials=int(spec.get("trials", 1)),
            max_concurrency=int(spec.get("maxConcurrency", DEFAULT_MAX_CONCURRENCY)),
            gates=tuple(spec.get("gates", ())),
            min_completion_rate=float(spec.get("minCompletionRate", 0.8)),
            max_evaluator_error_rate=float(spec.get("maxEvaluatorErrorRate", 0.1)),
            budget=budget,
            seed=int(spec.get("seed", 0)),
            judges=judges,
            labels=dict(meta.get("labels", {})),
            environment=environment,
            telemetry=telemetry,
            sinks=sinks,
            declaration=declaration,
            thresholds=tuple(thresholds),
            case_policy=case_policy_from(spec.get("casePolicy")),
            source=source,
            raw=self.doc,
        )

    def target(self, t: dict[str, Any]) -> TargetSpec | None:
        at: KeyPath = ("spec", "target")
        kinds = [k for k in TARGET_KINDS if k in t]
        if not kinds:
            self.bad(at, f"set one of {', '.join(TARGET_KINDS)} (the system under test)")
            return None
        template = t.get("template", "")
        if template:
            self.template((*at, "template"), template)
        common: dict[str, Any] = {
            "template": template,
            "system": t.get("system", ""),
            "timeout_s": float(t.get("timeoutSeconds", DEFAULT_TIMEOUT_S)),
            "requests_per_minute": _opt_float(t.get("requestsPerMinute")),
            "tokens_per_minute": _opt_float(t.get("tokensPerMinute")),
        }
        if "python" in t:
            ref = t["python"]
            if not _PY_REF.fullmatch(ref):
                self.bad(
                    (*at, "python"),
                    f"expected module:function (e.g. my_app.agent:answer), got {show(ref)}",
                )
            return TargetSpec(kind="python", python=ref, **common)
        if "http" in t:
            return TargetSpec(kind="http", http=self.http((*at, "http"), t["http"]), **common)
        kind: TargetKind = "model"
        agent, m = None, t.get("model")
        if "agent" in t:
            kind, a, m = "agent", t["agent"], t["agent"].get("model")
            at = (*at, "agent")
            agent_kind, sections = self.agent_kind(at, a)
            harness = self.harness((*at, "harness"), a["harness"]) if "harness" in a else None
            if agent_kind != "builtin":
                m = harness = None
            elif (m is None) == (harness is None):
                self.bad(at, "set one of model (the built-in loop) or harness (another harness)")
                if m is None:
                    return None
            duration = a.get("maxDuration", "")
            seconds = parse_duration(duration) if duration else None
            if duration and not seconds:
                self.bad(
                    (*at, "maxDuration"),
                    f"expected a positive duration such as 2m or 30s, got {show(duration)}",
                )
            max_tokens = int(a["maxTokens"]) if "maxTokens" in a else None
            if max_tokens is not None and max_tokens < 1:  # "-5" as a string passes the schema
                self.bad((*at, "maxTokens"), f"expected a value >= 1, got {max_tokens}")
            agent = AgentSpec(
                max_steps=int(a.get("maxSteps", 10)),
                max_tokens=max_tokens,
                max_usd=_opt_float(a.get("maxUsd")),
                max_seconds=seconds,
                harness=harness,
                kind=agent_kind,
                record_cassette=bool(a.get("cassette", {}).get("record", True)),
                user=self.user_simulator((*at, "user"), a["user"]) if "user" in a else None,
                **sections,
            )
            if m is None:
                return TargetSpec(kind=kind, agent=agent, **common)
        assert m is not None
        if m.get("connector") == "scripted":  # plays the sample's known trajectory: no endpoint
            if agent is None:
                self.bad(
                    (*at, "model", "connector"),
                    "scripted plays a sample's known trajectory; use it as target.agent.model",
                )
            elif "baseUrl" in m or "secretRef" in m:
                self.bad((*at, "model"), "a scripted model has no baseUrl or secretRef")
            return TargetSpec(
                kind=kind, agent=agent, connector="scripted", model=m["model"], **common
            )
        base_url, secret = self.endpoint((*at, "model"), m)
        api_version, region, auth = self.provider((*at, "model"), m, base_url)
        return TargetSpec(
            kind=kind,
            agent=agent,
            connector=m["connector"],
            base_url=base_url,
            model=m["model"],
            params=dict(m.get("params", {})),
            secret_ref=secret,
            api_version=api_version,
            region=region,
            auth=auth,
            **common,
        )

    def judge(self, name: str, j: dict[str, Any]) -> JudgeSpec:
        at: KeyPath = ("spec", "judges", name)
        base_url, secret = self.endpoint(at, j)
        api_version, region, auth = self.provider(at, j, base_url)
        return JudgeSpec(
            name=name,
            connector=j["connector"],
            base_url=base_url,
            model=j["model"],
            params=dict(j.get("params", {})),
            secret_ref=secret,
            timeout_s=float(j.get("timeoutSeconds", 120.0)),
            max_concurrency=int(j.get("maxConcurrency", 16)),
            scale=self.scale((*at, "scale"), j["scale"]) if "scale" in j else None,
            cache=bool(j.get("cache", True)),
            api_version=api_version,
            region=region,
            auth=auth,
        )

    def endpoint(self, at: KeyPath, m: dict[str, Any]) -> tuple[str, str]:
        """The checked base URL (the provider's default when omitted and it has one; Bedrock's
        comes from its region) and secret of a model or a judge."""
        from evalsi.connectors import BASE_URL_OPTIONAL, DEFAULT_BASE_URLS

        connector = m["connector"]
        base_url = m.get("baseUrl", "")
        if base_url and not _URL.fullmatch(base_url):
            self.bad((*at, "baseUrl"), f"expected an http:// or https:// URL, got {show(base_url)}")
        elif not base_url and connector in DEFAULT_BASE_URLS:
            base_url = DEFAULT_BASE_URLS[connector]
        elif not base_url and connector not in BASE_URL_OPTIONAL:
            example = (
                "https://NAME.openai.azure.com"
                if connector == "azure-openai"
                else "http://127.0.0.1:8000/v1"
            )
            self.bad(at, f"missing required field 'baseUrl' (e.g. {example})")
        secret = m.get("secretRef", "")
        if secret:
            secret = self.secret((*at, "secretRef"), secret)
        return base_url, secret

    def provider(self, at: KeyPath, m: dict[str, Any], base_url: str) -> tuple[str, str, str]:
        """The checked ``apiVersion``, ``region`` and ``auth`` of a model or a judge: Azure
        needs a version and a bare resource endpoint, Bedrock a region botocore knows, a bearer
        token a connector that sends one and a secret; a connector that takes none of them is
        refused one rather than ignoring it."""
        from evalsi.connectors import (
            BEARER_CONNECTORS,
            azure_endpoint_problem,
            bedrock_region_problem,
        )

        connector = m["connector"]
        api_version, region = str(m.get("apiVersion", "")), str(m.get("region", ""))
        if connector == "azure-openai":
            if not api_version:
                self.bad(at, "missing required field 'apiVersion' (e.g. 2024-10-21)")
            problem = azure_endpoint_problem(base_url) if base_url else None
            if problem:
                self.bad((*at, "baseUrl"), problem)
        elif api_version and connector != "gemini":
            self.bad((*at, "apiVersion"), f"the {connector} connector takes no apiVersion")
        if connector == "bedrock":
            try:
                problem = bedrock_region_problem(region)
            except UserError as e:  # botocore missing: the extra is needed to run it
                problem = _user_message(e)
            if problem and not region:
                self.bad(at, "missing required field 'region' (e.g. us-east-1)")
            elif problem:
                self.bad((*at, "region"), problem)
        elif region:
            self.bad((*at, "region"), f"the {connector} connector takes no region")
        auth = str(m.get("auth", ""))
        if auth == "bearer" and connector not in BEARER_CONNECTORS:
            self.bad(
                (*at, "auth"),
                f"the {connector} connector sends its key its own way (bearer is for "
                f"{' and '.join(BEARER_CONNECTORS)})",
            )
        elif auth == "bearer" and not m.get("secretRef"):
            self.bad((*at, "auth"), "a bearer token needs a secretRef (where the token is)")
        return api_version, region, auth

    def scale(self, at: KeyPath, s: dict[str, Any]) -> tuple[float, float] | None:
        low, high = s.get("min"), s.get("max")
        if low is None or high is None:
            self.bad(at, "expected both 'min' and 'max', e.g. {min: 1, max: 5}")
            return None
        if not float(low) < float(high):
            self.bad(at, f"expected min below max, got min {low}, max {high}")
            return None
        return float(low), float(high)

    def http(self, at: KeyPath, h: dict[str, Any]) -> dict[str, Any]:
        url, method = h["url"], h.get("method", "POST").upper()
        if not _URL.fullmatch(url):
            self.bad((*at, "url"), f"expected an http:// or https:// URL, got {show(url)}")
        if method not in HTTP_METHODS:
            self.bad((*at, "method"), f"expected one of {', '.join(HTTP_METHODS)}")
        elif "body" in h and h["body"] is not None and method in ("GET", "HEAD", "DELETE"):
            self.bad((*at, "body"), f"a {method} request carries no body (use POST)")
        output = h.get("output") or None
        if output is not None:
            from evalsi.connectors import JsonPath

            try:
                JsonPath(output)
            except UserError as e:
                self.bad((*at, "output"), _user_message(e))
        headers = dict(h.get("headers", {}))
        for name, value in headers.items():
            if value.startswith("secret:"):
                headers[name] = "secret:" + self.secret((*at, "headers", name), value[7:])
        return {
            "url": url,
            "method": method,
            "body": h.get("body"),
            "output": output,
            "headers": headers,
        }

    def template(self, at: KeyPath, text: str) -> None:
        import jinja2

        try:
            jinja2.Environment(autoescape=False).parse(text)
        except jinja2.TemplateSyntaxError as e:
            self.bad(at, f"not a valid Jinja2 template: {e.message} (template line {e.lineno})")

    def secret(self, at: KeyPath, ref: str) -> str:
        scheme, _, rest = ref.partition(":")
        if scheme == "env" and _ENV_NAME.fullmatch(rest):
            return ref
        if scheme == "file" and rest.strip():
            try:
                return f"file:{self.base_dir / expand_home(rest)}"
            except UserError as e:
                self.bad(at, _user_message(e))
                return ref
        # The value is not echoed: whoever got this wrong may have pasted the key itself.
        self.bad(
            at,
            "expected env:NAME or file:PATH (the value is not shown; if it is the key itself, "
            "move it to an environment variable or a file and reference that)",
        )
        return ""

    def dataset(self, d: dict[str, Any]) -> DatasetSpec | None:
        at: KeyPath = ("spec", "dataset")
        where = d["path"]
        if where.startswith("hf://"):
            from evalsi.datasets import parse_hf_uri

            try:
                parse_hf_uri(where)
            except UserError as e:
                self.bad((*at, "path"), _user_message(e))
            source = where
        elif _SCHEME.match(where):
            self.bad((*at, "path"), f"expected a file path or hf://OWNER/NAME, got {show(where)}")
            return None
        else:
            try:
                resolved = (self.base_dir / expand_home(where)).resolve()
            except UserError as e:
                self.bad((*at, "path"), _user_message(e))
                return None
            if not resolved.exists():
                self.bad(
                    (*at, "path"),
                    f"dataset not found: {resolved} (a relative path starts from the spec "
                    f"file's directory, {self.base_dir})",
                )
            source = str(resolved)
        fields: dict[str, str | None] = {k: (v or None) for k, v in d.get("fields", {}).items()}
        from evalsi.datasets import FieldMap

        known = [f.name for f in dataclasses.fields(FieldMap)]
        for key in fields:
            if key not in known:
                message = unknown_field(key, known).replace("field", "record part")
                self.bad((*at, "fields", key), message)
        if set(fields) <= set(known):
            try:
                FieldMap(**fields)
            except UserError as e:
                self.bad((*at, "fields"), _user_message(e))
        limit = int(d["limit"]) if "limit" in d else None
        if limit is not None and limit < 1:
            self.bad((*at, "limit"), f"expected a value >= 1, got {limit}")
        return DatasetSpec(source=source, fields=fields, limit=limit)

    def evaluators(self, items: list[dict[str, Any]]) -> tuple[EvaluatorEntry, ...]:
        seen: dict[str, int] = {}
        out = []
        for i, item in enumerate(items):
            entry = EvaluatorEntry(item["ref"], dict(item.get("params", {})), item.get("name", ""))
            instance = entry.name or entry.ref
            if instance in seen:
                self.bad(
                    ("spec", "evaluators", i),
                    f"{instance!r} is already spec.evaluators[{seen[instance]}]; give one of "
                    "them a distinct name",
                )
            seen.setdefault(instance, i)
            out.append(entry)
        return tuple(out)

    def budget(self, b: dict[str, Any]) -> BudgetSpec:
        at: KeyPath = ("spec", "budget")
        tokens = int(b["tokens"]) if "tokens" in b else None
        if tokens is not None and tokens < 1:
            self.bad((*at, "tokens"), f"expected a value >= 1, got {tokens}")
        wall = b.get("wallClock", "")
        seconds = parse_duration(wall) if wall else None
        if wall and not seconds:
            self.bad(
                (*at, "wallClock"),
                f"expected a positive duration such as 30m, 1h30m or 90s, got {show(wall)}",
            )
        return BudgetSpec(tokens=tokens, usd=_opt_float(b.get("usd")), wall_clock_s=seconds)

    def telemetry(self, t: dict[str, Any]) -> TelemetrySpec:
        at: KeyPath = ("spec", "telemetry", "otlp")
        o = t["otlp"]
        endpoint = o["endpoint"]
        if not _URL.fullmatch(endpoint):
            self.bad(
                (*at, "endpoint"),
                f"expected an http:// or https:// URL such as http://collector:4318, got "
                f"{show(endpoint)}",
            )
        headers: dict[str, str] = dict(o.get("headers", {}))
        for key, value in headers.items():
            if value.startswith("secret:"):  # the same checks as an HTTP target's headers
                headers[key] = "secret:" + self.secret((*at, "headers", key), value[7:])
        return TelemetrySpec(
            endpoint=endpoint,
            headers=headers,
            protocol=o.get("protocol", "http/protobuf"),
            timeout_s=float(o.get("timeoutSeconds", 10.0)),
        )

    def sink(self, i: int, doc: dict[str, Any]) -> SinkSpec:
        """``spec.sinks[i]``: the schema checked its keys; a secret is a reference."""
        sink = sink_entry(doc)
        if sink.options.get("secretRef"):
            at: KeyPath = ("spec", "sinks", i, sink.kind, "secretRef")
            sink.options["secretRef"] = self.secret(at, sink.options["secretRef"])
        return sink


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _user_message(e: UserError) -> str:
    return f"{e.message} ({e.hint})" if e.hint else e.message
