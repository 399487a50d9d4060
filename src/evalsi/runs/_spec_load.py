"""Load an ``EvalRun`` spec (YAML) into a ``RunSpec``: parse, validate, check, resolve.

Three steps, each reporting every problem it finds in one ``SpecError`` whose lines read
``run.yaml:12: spec.target.model.baseUrl: expected ...``:

1. ``_spec_yaml`` parses the YAML, remembering the line of every key and list item (and
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
import difflib
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from evalsi.core import SpecError, UserError
from evalsi.runs._runspec import (
    BudgetSpec,
    DatasetSpec,
    EvaluatorEntry,
    JudgeSpec,
    RunSpec,
    TargetSpec,
)
from evalsi.runs._spec_yaml import KeyPath, check_plain, line_of, parse_yaml, where

API_VERSION = "evals.si/v1alpha1"
KIND = "EvalRun"
MAX_SPEC_BYTES = 1 << 20
MAX_REPORTED = 20
DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_TIMEOUT_S = 60.0
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
TARGET_KINDS = ("model", "python", "http")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PY_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL = re.compile(r"https?://\S+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|d|h|m|s))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def read_spec_text(path: Path, shown: str, what: str = "spec") -> str:
    """A spec file's text (UTF-8, at most ``MAX_SPEC_BYTES``), or a ``SpecError`` naming it."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError as e:
        raise SpecError(f"{shown}: cannot read the {what} file (not found)") from e
    except IsADirectoryError as e:
        raise SpecError(f"{shown}: cannot read the {what} file (it is a directory)") from e
    except OSError as e:
        raise SpecError(f"{shown}: cannot read the {what} file ({e.strerror or e})") from e
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"{shown}: the {what} file is larger than {MAX_SPEC_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(f"{shown}: not UTF-8 text (byte {e.start})") from e


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


@cache
def _validator() -> Draft202012Validator:
    text = resources.files("evalsi.runs").joinpath("schemas/evalrun.schema.json").read_text("utf-8")
    return Draft202012Validator(json.loads(text))


@dataclasses.dataclass(frozen=True)
class _Problem:
    line: int
    path: KeyPath
    message: str


def _build(
    doc: Any, lines: dict[KeyPath, int], shown: str, base_dir: str | Path | None, source: str
) -> RunSpec:
    problems = [p for e in _validator().iter_errors(doc) for p in _explain(e, lines)]
    if not problems:
        if base_dir is None:
            base_dir = Path(source).resolve().parent if source else Path.cwd()
        builder = _SpecBuilder(doc, lines, Path(base_dir))
        spec = builder.build(source)
        if spec is not None:
            return spec
        problems = builder.problems
    unique = sorted(set(problems), key=lambda p: (p.line, tuple(map(str, p.path)), p.message))
    rendered = [where(shown, lines, p.path, p.line) + p.message for p in unique]
    if len(rendered) > MAX_REPORTED:
        rendered = [*rendered[:MAX_REPORTED], f"... and {len(rendered) - MAX_REPORTED} more"]
    raise SpecError("\n".join(rendered))


def _explain(error: ValidationError, lines: Mapping[KeyPath, int]) -> list[_Problem]:
    path: KeyPath = tuple(error.absolute_path)
    line = line_of(lines, path)
    value: Any = error.instance
    keyword: Any = error.validator
    expected: Any = error.validator_value
    schema: Any = error.schema
    if keyword == "additionalProperties" and isinstance(value, Mapping):
        known = list(schema.get("properties", {}))
        return [
            _Problem(line_of(lines, (*path, key)), (*path, key), _unknown(key, known))
            for key in value
            if key not in known
        ]
    if keyword == "required" and isinstance(value, Mapping):
        return [
            _Problem(line, path, f"missing required field {name!r}")
            for name in expected
            if name not in value
        ]
    if keyword == "not" and isinstance(value, Mapping):
        members = list(dict.fromkeys(m for alt in expected["anyOf"] for m in alt["required"]))
        found = [m for m in members if m in value]
        text = f"set only one of {', '.join(members)} (found {', '.join(found)})"
        return [_Problem(line, path, text)]
    return [_Problem(line, path, _expectation(keyword, expected, value, error))]


def _expectation(keyword: Any, expected: Any, value: Any, error: ValidationError) -> str:
    if keyword == "type" or (keyword == "pattern" and "[0-9]" in str(expected)):
        kinds = expected if isinstance(expected, list) else [expected]
        if keyword == "pattern" or set(kinds) == {"integer", "string"}:
            kinds = ["integer"]
        want = " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
        note = ""
        if kinds == ["string"] and isinstance(value, bool | int | float):
            note = " (quote it: YAML reads yes/no/on/off as booleans and digits as numbers)"
        return f"expected {want}, got {_show(value)}{note}"
    if keyword == "const":
        return f"expected {expected!r}, got {_show(value)}"
    if keyword == "enum":
        options = [str(o) for o in expected]
        close = _closest(str(value), options)
        guess = f" (did you mean {close}?)" if close else ""
        return f"expected one of {', '.join(options)}; got {_show(value)}{guess}"
    bounds = {
        "minimum": ">=",
        "maximum": "<=",
        "exclusiveMinimum": ">",
        "exclusiveMaximum": "<",
    }
    if keyword in bounds:
        return f"expected a value {bounds[keyword]} {expected}, got {_show(value)}"
    if keyword == "minItems":
        return f"expected at least {expected} item{'s' if expected != 1 else ''}, got none"
    if keyword == "minLength":
        return "expected a non-empty string"
    if keyword == "maxLength":
        return f"expected at most {expected} characters, got {len(value)}"
    return str(error.message)


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _closest(word: str, known: list[str]) -> str | None:
    """The known word ``word`` most likely meant: same letters, a prefix, or a near spelling."""

    def squash(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    for candidate in known:
        if squash(candidate) == squash(word):
            return candidate
    if len(word) >= 3:
        for candidate in known:
            if candidate.startswith(word):
                return candidate
    matches = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _unknown(key: str, known: list[str]) -> str:
    close = _closest(key, known)
    if close is not None:
        return f"unknown field {key!r} (did you mean {close}?)"
    return f"unknown field {key!r} (expected one of: {', '.join(known)})"


def _show(value: Any) -> str:
    if value is None:
        return "an empty value (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    return repr(value)


# --- semantic checks and the RunSpec -----------------------------------------------------------


class _SpecBuilder:
    """Turns a schema-valid document into a ``RunSpec``, collecting what is still wrong."""

    def __init__(self, doc: dict[str, Any], lines: Mapping[KeyPath, int], base_dir: Path) -> None:
        self.doc = doc
        self.lines = lines
        self.base_dir = base_dir
        self.problems: list[_Problem] = []

    def bad(self, path: KeyPath, message: str) -> None:
        self.problems.append(_Problem(line_of(self.lines, path), path, message))

    def build(self, source: str) -> RunSpec | None:
        meta, spec = self.doc["metadata"], self.doc["spec"]
        name = meta["name"]
        if not _NAME.fullmatch(name):
            self.bad(
                ("metadata", "name"),
                f"expected a DNS-1123 name (lower-case letters, digits, '-' and '.', starting "
                f"and ending with a letter or digit), got {_show(name)}",
            )
        target = self.target(spec["target"])
        dataset = self.dataset(spec["dataset"])
        evaluators = self.evaluators(spec["evaluators"])
        budget = self.budget(spec["budget"]) if "budget" in spec else None
        judges = {name: self.judge(name, j) for name, j in sorted(spec.get("judges", {}).items())}
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
                    f"expected module:function (e.g. my_app.agent:answer), got {_show(ref)}",
                )
            return TargetSpec(kind="python", python=ref, **common)
        if "http" in t:
            return TargetSpec(kind="http", http=self.http((*at, "http"), t["http"]), **common)
        m, mat = t["model"], (*at, "model")
        connector, base_url = m["connector"], m.get("baseUrl", "")
        if base_url and not _URL.fullmatch(base_url):
            self.bad(
                (*mat, "baseUrl"), f"expected an http:// or https:// URL, got {_show(base_url)}"
            )
        elif not base_url and connector == "anthropic":
            base_url = ANTHROPIC_BASE_URL
        elif not base_url:
            self.bad(mat, "missing required field 'baseUrl' (e.g. http://127.0.0.1:8000/v1)")
        secret = m.get("secretRef", "")
        if secret:
            secret = self.secret((*mat, "secretRef"), secret)
        return TargetSpec(
            kind="model",
            connector=connector,
            base_url=base_url,
            model=m["model"],
            params=dict(m.get("params", {})),
            secret_ref=secret,
            **common,
        )

    def judge(self, name: str, j: dict[str, Any]) -> JudgeSpec:
        at: KeyPath = ("spec", "judges", name)
        connector, base_url = j["connector"], j.get("baseUrl", "")
        if base_url and not _URL.fullmatch(base_url):
            self.bad(
                (*at, "baseUrl"), f"expected an http:// or https:// URL, got {_show(base_url)}"
            )
        elif not base_url and connector == "anthropic":
            base_url = ANTHROPIC_BASE_URL
        elif not base_url:
            self.bad(at, "missing required field 'baseUrl' (e.g. http://127.0.0.1:8000/v1)")
        secret = j.get("secretRef", "")
        if secret:
            secret = self.secret((*at, "secretRef"), secret)
        return JudgeSpec(
            name=name,
            connector=connector,
            base_url=base_url,
            model=j["model"],
            params=dict(j.get("params", {})),
            secret_ref=secret,
            timeout_s=float(j.get("timeoutSeconds", 120.0)),
            max_concurrency=int(j.get("maxConcurrency", 16)),
            scale=self.scale((*at, "scale"), j["scale"]) if "scale" in j else None,
            cache=bool(j.get("cache", True)),
        )

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
            self.bad((*at, "url"), f"expected an http:// or https:// URL, got {_show(url)}")
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
            return f"file:{self.base_dir / Path(rest).expanduser()}"
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
            self.bad((*at, "path"), f"expected a file path or hf://OWNER/NAME, got {_show(where)}")
            return None
        else:
            resolved = (self.base_dir / Path(where).expanduser()).resolve()
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
                self.bad((*at, "fields", key), _unknown(key, known).replace("field", "record part"))
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
                f"expected a positive duration such as 30m, 1h30m or 90s, got {_show(wall)}",
            )
        return BudgetSpec(tokens=tokens, usd=_opt_float(b.get("usd")), wall_clock_s=seconds)


def parse_duration(text: str) -> float | None:
    """Seconds in a duration such as ``"1h30m"`` (units d, h, m, s, ms), or None if malformed.

    Example:
        >>> parse_duration("1h30m"), parse_duration("250ms"), parse_duration("soon")
        (5400.0, 0.25, None)
    """
    if not _DURATION.fullmatch(text):
        return None
    return sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(text))


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _user_message(e: UserError) -> str:
    return f"{e.message} ({e.hint})" if e.hint else e.message
