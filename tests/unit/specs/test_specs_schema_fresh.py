"""The committed EvalRun JSON Schema must be exactly what scripts/gen_schema.py makes from proto/.

``proto/`` is the single source of truth: the JSON Schema of the YAML specs is generated from
the proto, committed, and a test fails when it is stale.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from evalsi._proto.evalsi.v1alpha1 import run_pb2

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen_schema.py"
COMMITTED = ROOT / "src" / "evalsi" / "specs" / "schemas"
SCHEMA_FILE = "evalrun.schema.json"


def run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def committed_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((COMMITTED / SCHEMA_FILE).read_text(encoding="utf-8"))
    return loaded


def test_committed_schema_matches_a_fresh_generation(tmp_path: Path) -> None:
    proc = run_script("--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    fresh = (tmp_path / SCHEMA_FILE).read_text(encoding="utf-8")
    assert fresh == (COMMITTED / SCHEMA_FILE).read_text(encoding="utf-8"), (
        "src/evalsi/specs/schemas is stale: run `python scripts/gen_schema.py`"
    )


def test_check_mode_passes_on_a_faithful_copy_and_names_a_stale_file(tmp_path: Path) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(COMMITTED, copy)
    ok = run_script("--check", "--out", copy)
    assert ok.returncode == 0, ok.stderr

    stale = copy / SCHEMA_FILE
    edited = stale.read_text().replace('"minimum": 1', '"minimum": 2', 1)
    stale.write_text(edited)
    failed = run_script("--check", "--out", copy)
    assert failed.returncode == 1
    assert f"stale: {SCHEMA_FILE}" in failed.stderr
    # --check never writes.
    assert stale.read_text() == edited

    (copy / SCHEMA_FILE).unlink()
    assert run_script("--check", "--out", copy).returncode == 1


def test_the_schema_is_valid_draft_2020_12() -> None:
    schema = committed_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_every_proto_field_appears_under_its_json_name_and_nothing_else_does() -> None:
    defs = committed_schema()["$defs"]
    seen: set[str] = set()
    pending = [run_pb2.EvalRun.DESCRIPTOR]
    while pending:
        message = pending.pop()
        if message.full_name in seen or message.full_name.startswith("google.protobuf."):
            continue
        seen.add(message.full_name)
        schema = defs[message.full_name]
        assert schema["additionalProperties"] is False, message.full_name
        assert list(schema["properties"]) == [f.json_name for f in message.fields]
        for field in message.fields:
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                entry = entry.fields_by_name["value"].message_type  # map<string, Message>
            if entry is not None:
                pending.append(entry)
    assert set(defs) == seen


def test_the_target_oneof_allows_at_most_one_member() -> None:
    target = committed_schema()["$defs"]["evalsi.v1alpha1.Target"]
    pairs = target["allOf"][0]["not"]["anyOf"]
    assert sorted(sorted(p["required"]) for p in pairs) == [
        ["agent", "http"],
        ["agent", "model"],
        ["agent", "python"],
        ["http", "model"],
        ["http", "python"],
        ["model", "python"],
    ]
    # proto3 `optional` fields are presence markers, not oneofs.
    assert len(target["allOf"]) == 1


def test_proto_json_names_are_camel_case_as_in_kubernetes() -> None:
    defs = committed_schema()["$defs"]
    assert "maxConcurrency" in defs["evalsi.v1alpha1.EvalRunSpec"]["properties"]
    assert "baseUrl" in defs["evalsi.v1alpha1.ModelTarget"]["properties"]
    assert "secretRef" in defs["evalsi.v1alpha1.ModelTarget"]["properties"]
    assert "wallClock" in defs["evalsi.v1alpha1.Budget"]["properties"]
    root = defs["evalsi.v1alpha1.EvalRun"]
    assert root["properties"]["apiVersion"]["const"] == "evals.si/v1alpha1"
    assert root["properties"]["kind"]["const"] == "EvalRun"
