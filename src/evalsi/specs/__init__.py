"""Spec files (``EvalRun``, ``OnlineEvalPolicy``): YAML with the line of every key, the JSON
Schemas generated from the proto, and errors that name the line, the field and what was
expected. Each kind's own checks live with the kind (``runs``, ``traces``)."""

from evalsi.specs._checks import (
    MAX_REPORTED,
    MAX_SPEC_BYTES,
    NAME,
    Problem,
    parse_duration,
    raise_problems,
    read_spec_text,
    schema_problems,
    schema_validator,
    show,
    unknown_field,
)
from evalsi.specs._yaml import KeyPath, check_plain, key_path_text, line_of, parse_yaml, where

__all__ = [
    "MAX_REPORTED",
    "MAX_SPEC_BYTES",
    "NAME",
    "KeyPath",
    "Problem",
    "check_plain",
    "key_path_text",
    "line_of",
    "parse_duration",
    "parse_yaml",
    "raise_problems",
    "read_spec_text",
    "schema_problems",
    "schema_validator",
    "show",
    "unknown_field",
    "where",
]
