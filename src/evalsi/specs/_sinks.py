"""Sinks named outside a run spec: a file holding ``sinks: [...]`` (the same entries as
``spec.sinks``, checked against the same schema), and the short ``KIND:WHERE`` forms
``evalsi export --to`` takes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft202012Validator

from evalsi.core import SpecError, UserError
from evalsi.specs._checks import _explain, raise_problems, read_spec_text, schema_validator
from evalsi.specs._evalrun import SinkKind, SinkSpec
from evalsi.specs._yaml import KeyPath, parse_yaml

TO_FORMS = (
    "mlflow:http(s)://TRACKING_SERVER",
    "s3://BUCKET[/PREFIX]",
    "webhook:http(s)://URL",
    "wandb:PROJECT",
    "langfuse:http(s)://HOST",
    "langsmith:PROJECT",
)


@cache
def _list_validator() -> Draft202012Validator:
    defs = cast(Mapping[str, Any], schema_validator("evalrun").schema)["$defs"]
    schema = {
        "type": "object",
        "properties": {
            "sinks": {"type": "array", "items": {"$ref": "#/$defs/evalsi.v1alpha1.Sink"}}
        },
        "required": ["sinks"],
        "additionalProperties": False,
        "$defs": defs,
    }
    return Draft202012Validator(schema)


def sinks_from(
    doc: Any, shown: str, lines: dict[KeyPath, int] | None = None
) -> tuple[SinkSpec, ...]:
    """The sinks of ``{"sinks": [...]}``, or a ``SpecError`` naming each bad field."""
    lines = lines or {}
    problems = [p for e in _list_validator().iter_errors(doc) for p in _explain(e, lines)]
    if problems:
        raise_problems(shown, lines, problems)
    return tuple(sink_entry(entry) for entry in doc["sinks"])


def sink_entry(entry: Mapping[str, Any]) -> SinkSpec:
    """A schema-checked ``sinks[i]`` entry (exactly one kind) as a ``SinkSpec``."""
    ((kind, options),) = entry.items()
    return SinkSpec(cast(SinkKind, kind), dict(options))


def load_sinks(path: str | Path) -> tuple[SinkSpec, ...]:
    """The sinks of a YAML file holding ``sinks: [...]``."""
    shown = str(path)
    doc, lines = parse_yaml(read_spec_text(Path(path), shown, "sinks"), shown)
    return sinks_from(doc, shown, lines)


def sink_of(text: str) -> SinkSpec:
    """The sink a ``--to`` value names (see ``TO_FORMS``), checked as a spec entry is."""
    kind, sep, rest = text.partition(":")
    entry: dict[str, Any]
    if kind == "s3" and rest.startswith("//"):
        bucket, _, prefix = rest[2:].partition("/")
        entry = {"s3": {"bucket": bucket, **({"prefix": prefix} if prefix else {})}}
    elif kind == "mlflow" and sep:
        entry = {"mlflow": {"trackingUri": rest}}
    elif kind == "webhook" and sep:
        entry = {"webhook": {"url": rest}}
    elif kind == "wandb" and sep:
        entry = {"wandb": {"project": rest}}
    elif kind == "langfuse" and sep:
        # The keys by Langfuse's own variables: the public key's value, the secret by reference.
        public = os.environ.get("LANGFUSE_PUBLIC_KEY", "")
        if not public:
            raise UserError(
                f"--to {text!r}: LANGFUSE_PUBLIC_KEY is not set",
                hint="export LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY, or give both in "
                "--sinks FILE (publicKey, secretKeyRef)",
            )
        entry = {"langfuse": {"host": rest, "publicKey": public,
                              "secretKeyRef": "env:LANGFUSE_SECRET_KEY"}}  # fmt: skip
    elif kind == "langsmith" and sep:
        endpoint = os.environ.get("LANGSMITH_ENDPOINT", "")
        entry = {"langsmith": {"project": rest, "apiKeyRef": "env:LANGSMITH_API_KEY",
                               **({"endpoint": endpoint} if endpoint else {})}}  # fmt: skip
    else:
        raise UserError(
            f"--to {text!r}: not a sink",
            hint="one of " + ", ".join(TO_FORMS) + "; or --sinks FILE for every option",
        )
    try:
        return sinks_from({"sinks": [entry]}, f"--to {text}")[0]
    except SpecError as e:
        raise UserError(str(e).replace("sinks[0].", "")) from None


__all__ = ["TO_FORMS", "load_sinks", "sink_entry", "sink_of", "sinks_from"]
