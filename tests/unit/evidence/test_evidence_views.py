"""The trajectory side of validation (``_views``): the same findings in process and in the
child process a large bundle gets, and a derived view that differs by one byte is refused."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import orjson
import pytest

from evalsi.connectors import TargetOutput
from evalsi.core import Check, Content, Step, ToolCall, Trajectory
from evalsi.evidence import _validate as validate_module
from evalsi.evidence import validate_bundle, write_bundle
from evalsi.evidence._views import check_views
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.bundles import reseal as _reseal
from tests.support.registry import BUILTINS


def agent(question: str) -> TargetOutput:
    i = int(question.removeprefix("q"))
    steps = [
        Step("llm_call", "m", input=[{"role": "user", "content": question}]),
        Step("tool_call", "lookup", tool_call=ToolCall("lookup", {"q": i}), output={"n": i}),
        Step("tool_call", "save", tool_call=ToolCall("save", {"v": "é"}), error="denied")
        if i % 2
        else Step("other", "note"),
    ]
    checks = [Check("saved", i % 2 == 0)] if i % 3 else []
    return TargetOutput(
        output=Content.of_text(f"a{i}"),
        trajectory=Trajectory(steps, "final_answer", checks, {"i": i} if checks else None),
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("views")
    data = tmp / "q.jsonl"
    data.write_bytes(
        b"".join(orjson.dumps({"id": f"s{i}", "input": f"q{i}"}) + b"\n" for i in range(12))
    )
    spec = RunSpec(
        name="views",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="no-tool-error"),),
        trials=2,
    )
    db = SqlStore.open(tmp / "s.db")
    try:
        run_id = asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
        write_bundle(db, run_id, tmp / "b")
    finally:
        db.close()
    return tmp / "b"


@pytest.fixture(params=["in-process", "child"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "child":
        monkeypatch.setattr(validate_module, "PARALLEL_BYTES", 0)
    return str(request.param)


def test_a_sealed_agent_bundle_validates_either_way(bundle: Path, mode: str) -> None:
    v = validate_bundle(bundle)
    assert v.exit_code == 0, v.findings
    views = check_views(str(bundle))
    assert views.tool_calls == len((bundle / "tool_calls.jsonl").read_bytes().splitlines())
    assert views.tool_calls == 36  # 24 tasks: a lookup each, a save on odd samples
    assert views.end_states == 16  # checks on samples not divisible by 3


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("tool_calls.jsonl", b'"denied"', b'"allowed"'),
        ("tool_calls.jsonl", b'{"q":3}', b'{"q":4}'),
        ("end_states.jsonl", b'"passed":false', b'"passed":true'),
        ("trajectories.jsonl", b'"name":"lookup"}', b'"name":"lookUp"}'),
    ],
)
def test_one_changed_view_byte_is_refused_either_way(
    bundle: Path, tmp_path: Path, mode: str, name: str, old: bytes, new: bytes
) -> None:
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    data = (copy / name).read_bytes()
    assert old in data
    (copy / name).write_bytes(data.replace(old, new, 1))
    _reseal(copy)
    v = validate_bundle(copy)
    assert v.exit_code == 1
    assert any(f.startswith(("tool_calls.jsonl", "end_states.jsonl")) for f in v.findings), (
        v.findings
    )


def test_a_trajectory_on_a_lost_task_is_refused(bundle: Path, tmp_path: Path, mode: str) -> None:
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    lines = (copy / "records.jsonl").read_bytes().splitlines(keepends=True)
    first = orjson.loads(lines[0])
    first["status"] = "infra_error"
    lines[0] = orjson.dumps(first, option=orjson.OPT_SORT_KEYS) + b"\n"
    (copy / "records.jsonl").write_bytes(b"".join(lines))
    _reseal(copy)
    v = validate_bundle(copy)
    assert any("has a trajectory, and no answer" in f for f in v.findings), v.findings
