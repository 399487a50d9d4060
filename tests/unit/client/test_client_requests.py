"""The client's pure parts: request building, error mapping, spec and dataset preparation, and
the CLI's --server flag rules (no server needed)."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi.cli._remote import refuse_local_flags, server_of
from evalsi.client._common import check_gates, check_local_only, gate_list, settings
from evalsi.client._errors import translate
from evalsi.client._requests import evaluate_options, evaluator_name, evaluator_specs
from evalsi.client._specs import dataset_name, raw_rows, row_chunks
from evalsi.core import DatasetError, NotFoundError, RunError, UserError
from evalsi.wire import struct_from_proto


def test_evaluator_specs_take_params_by_instance_name_or_ref() -> None:
    specs = evaluator_specs(
        ["builtin/exact-match@1.0.0", {"ref": "contains", "name": "c2", "params": {"x": 1}}],
        {"exact-match": {"ignore_case": "true"}, "c2": {"y": 2}},
    )
    assert [(s.ref, s.name) for s in specs] == [
        ("builtin/exact-match@1.0.0", ""),
        ("contains", "c2"),
    ]
    assert struct_from_proto(specs[0].params) == {"ignore_case": "true"}
    # Entry params win over the per-name mapping, as in evalsi.evaluate.
    assert struct_from_proto(specs[1].params) == {"y": 2, "x": 1}


@pytest.mark.parametrize(
    ("evaluators", "needle"),
    [([], "no evaluators"), ([{"name": "x"}], "expected keys ref"), ([object()], "cannot send")],
)
def test_evaluator_specs_refuse_what_a_server_cannot_run(
    evaluators: list[object], needle: str
) -> None:
    with pytest.raises(UserError, match=needle):
        evaluator_specs(evaluators, None)


def test_evaluator_name_strips_namespace_and_version() -> None:
    assert evaluator_name("builtin/exact-match@1.0.0") == "exact-match"
    assert evaluator_name("fuzzy-match") == "fuzzy-match"


def test_bootstrap_maps_to_the_wire_ci_method_and_seed_is_always_sent() -> None:
    options = evaluate_options(bootstrap="bca", seed=0)
    assert options.ci_method == "bootstrap-bca"
    assert options.HasField("seed")
    assert options.seed == 0
    assert evaluate_options(bootstrap=None, seed=7).ci_method == ""


def test_connect_codes_map_to_evalsi_errors() -> None:
    url = "http://127.0.0.1:1"
    bad = translate(
        ConnectError(Code.INVALID_ARGUMENT, "evaluators[0].ref: unknown (hint: x)"), url
    )
    assert type(bad) is UserError
    assert bad.message == "evaluators[0].ref: unknown"
    assert bad.hint == "x"
    assert isinstance(translate(ConnectError(Code.NOT_FOUND, "no run 'z'"), url), NotFoundError)
    # A connection that could not be made (the transport error is the cause) names the URL.
    try:
        raise ConnectError(Code.UNAVAILABLE, "connection refused") from OSError("refused")
    except ConnectError as e:
        down = translate(e, url)
    assert isinstance(down, RunError)  # ServerUnavailable: evalsi watch reconnects on it
    assert down.exit_code == 3
    assert f"cannot reach the evalsi server at {url}" in str(down)
    # UNAVAILABLE sent by the server itself is its own failure, not an unreachable server.
    sent = translate(ConnectError(Code.UNAVAILABLE, "store is locked"), url)
    assert isinstance(sent, RunError)
    assert "cannot reach" not in str(sent)
    assert "store is locked" in str(sent)
    assert translate(ConnectError(Code.RESOURCE_EXHAUSTED, "too big"), url).exit_code == 2


def test_settings_check_url_protocol_and_timeout() -> None:
    s = settings("http://127.0.0.1:8080/", "grpc", 5, {"x-a": "b"})
    assert s.url == "http://127.0.0.1:8080"
    assert s.timeout_ms == 5000
    with pytest.raises(UserError, match="expected http://HOST:PORT"):
        settings("127.0.0.1:8080", "connect", None, None)
    with pytest.raises(UserError, match="protocol 'soap'"):
        settings("http://h:1", "soap", None, None)
    with pytest.raises(UserError, match="timeout"):
        settings("http://h:1", "connect", 0, None)


def test_dataset_names_follow_the_service_rules() -> None:
    assert dataset_name("data/QA set.jsonl") == "qa-set"
    assert dataset_name("/x/train.json.gz") == "train"
    assert dataset_name("___.jsonl") == "dataset"


def test_raw_rows_read_jsonl_gz_and_json_wrappers(tmp_path: Path) -> None:
    rows = [{"id": "a", "n": 1}, {"id": "b", "nested": {"k": [1, 2]}}]
    gz = tmp_path / "d.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert list(raw_rows(str(gz))) == rows
    wrapped = tmp_path / "d.json"
    wrapped.write_text(json.dumps({"rows": rows}))
    assert list(raw_rows(str(wrapped))) == rows
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\nnot json\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl:2: not valid JSON"):
        list(raw_rows(str(bad)))
    csv = tmp_path / "d.csv"
    csv.write_text("a\n1\n")
    with pytest.raises(DatasetError, match="only JSONL and JSON"):
        list(raw_rows(str(csv)))


def test_row_chunks_stay_under_the_byte_budget() -> None:
    rows = [{"text": "x" * 100, "i": i} for i in range(50)]
    chunks = list(row_chunks(iter(rows), 1000))
    assert sum(len(c) for c in chunks) == 50
    assert len(chunks) > 5
    assert all(sum(m.ByteSize() for m in c) <= 1000 for c in chunks)
    assert struct_from_proto(chunks[-1][-1]) == rows[-1]


def test_gates_are_sent_as_given_and_a_server_ignoring_them_is_an_error() -> None:
    assert gate_list(()) == []
    assert gate_list("") == []
    assert gate_list("metric('a').mean > 0") == ["metric('a').mean > 0"]
    assert gate_list(["g1", "g2"]) == ["g1", "g2"]
    with pytest.raises(UserError, match=r"gates\[1\]: expected a CEL expression string"):
        gate_list(["g1", 3])  # type: ignore[list-item]
    check_gates(["g1"], [object()], "http://h:1")
    check_gates([], [], "http://h:1")
    with pytest.raises(RunError, match="answered 0 gate result"):
        check_gates(["g1"], [], "http://h:1")


def test_name_is_sent_and_store_is_still_refused() -> None:
    check_local_only({"store": None, "judges": ""})
    with pytest.raises(UserError, match="store= cannot be used with a server"):
        check_local_only({"store": "x.db"})
    with pytest.raises(UserError, match="unexpected argument name="):
        check_local_only({"name": "n"})  # evaluate takes it as an argument of its own


def test_server_flag_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSI_SERVER", raising=False)
    assert server_of(argparse.Namespace(server=None)) is None
    monkeypatch.setenv("EVALSI_SERVER", "http://h:1")
    assert server_of(argparse.Namespace(server=None)) == "http://h:1"
    assert server_of(argparse.Namespace(server="http://other:2")) == "http://other:2"


def test_local_only_flags_are_refused_with_a_server() -> None:
    args = argparse.Namespace(store="x.db", execute_only=False)
    refuse_local_flags(argparse.Namespace(store=None), "http://h:1", store="why")
    with pytest.raises(UserError, match="--store cannot be combined with --server http://h:1"):
        refuse_local_flags(args, "http://h:1", store="why", execute_only="why")
