"""``evalsi shadow --server`` and ``Client.shadow`` over a real server: a run the server made,
its tasks promoted into a project dataset, then replayed against a better and a worse
candidate there (exit codes 0 and 1, the embedded command's JSON), the candidate's inputs
uploaded without the recorded answers, and local-only flags refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.cli import main as cli_main
from evalsi.core import UserError
from tests.support.server_state import server_state, serving

GOOD = {f"q{i}": f"a{i}" for i in range(30)}


def flaky(text: str) -> str:
    return "wrong" if int(text[1:]) % 3 == 0 else GOOD[text]


def fixed(text: str) -> str:
    return GOOD[text]


def broken(text: str) -> str:
    return "wrong"


def _doc(target: str, data: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": target},
        "spec": {
            "target": {"python": f"{__name__}:{target}"},
            "dataset": {"path": data},
            "evaluators": [{"ref": "exact-match"}],
        },
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """(url, the promoted run's id, tmp): ``regr`` holds the run's 30 tasks, 10 failing."""
    tmp = tmp_path_factory.mktemp("shadowsrv")
    rows = [{"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"} for i in range(30)]
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for target in ("better", "worse"):
        spec = _doc("fixed" if target == "better" else "broken", str(data))
        (tmp / f"{target}.yaml").write_text(json.dumps(spec))
    with serving(server_state(tmp, allow_python_targets=True)) as server:
        with evalsi.Client(server.url) as client:
            run = client.create_run(_doc("flaky", str(data)))
            assert run.status == "done", run
            promoted = client.promote("regr", run_id=run.run_id, limit=30)
            assert promoted["rows_added"] == 30
        yield server.url, run.run_id, tmp


def _shadow_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = cli_main(["shadow", *args, "--format", "json"])
    captured = capsys.readouterr()
    out = captured.out
    assert code in (0, 1), captured.err
    return code, json.loads(out) if out.strip() else {}


def test_shadow_on_the_server_from_a_project_dataset(
    served: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, run_id, tmp = served
    better = str(tmp / "better.yaml")
    code, doc = _shadow_cli(capsys, "-f", better, "--data", "regr", "--server", url)
    assert code == 0
    (m,) = doc["comparison"]["metrics"]
    assert (m["n_paired"], m["mean_a"], m["mean_b"]) == (30, 20 / 30, 1.0)
    assert m["verdict"] == "improved"
    assert doc["regressions"] == []
    assert doc["rows"] == 30
    assert doc["candidate"]["status"] == "done"

    worse = str(tmp / "worse.yaml")
    code, doc = _shadow_cli(capsys, "-f", worse, "--data", "regr", "--server", url)
    assert code == 1
    (reg,) = doc["regressions"]
    assert (reg["metric"], reg["delta"], reg["n_paired"]) == ("exact-match", -20 / 30, 30)
    assert reg["ci"][1] < 0

    with evalsi.Client(url) as client:
        # both runs are the server's, in its project
        assert client.run_info(doc["candidate_run"]).kind == "run"
        assert client.run_info(doc["recorded_run"]).kind == "score"
        assert client.run_info(doc["candidate_run"]).id != run_id
        # the candidate read inputs without the recorded answers; provenance kept
        inputs = client.get_dataset("regr.inputs", page_size=100).rows
        assert len(inputs) == 30
        for row in inputs:
            assert not set(row) & {"output", "trajectory", "usage"}
            assert row["metadata"]["promoted"]["run_id"] == run_id
        tasks = [t for page in client.list_run_tasks(doc["candidate_run"]) for t in page]
        assert {t["output"] for t in tasks} == {"wrong"}


def test_the_python_api_shadows_a_local_rows_file(served: tuple[str, str, Path]) -> None:
    url, _, tmp = served
    with evalsi.Client(url) as client:
        rows = client.get_dataset("regr", page_size=100).rows
        failing = [r for r in rows if r["output"] == "wrong"]
        path = tmp / "failing.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in failing))
        result = client.shadow(_doc("fixed", str(tmp / "data.jsonl")), path)
        assert result.exit_code == 0
        m = result.comparison.metric("exact-match")
        assert (m.n_paired, m.mean_a, m.mean_b) == (10, 0.0, 1.0)
        same = client.shadow(str(tmp / "worse.yaml"), str(path), evaluators=["exact-match"])
        assert same.exit_code == 0  # wrong before, wrong now: no regression
        assert same.comparison.metric("exact-match").delta == 0.0
        with pytest.raises(UserError, match="confidence level"):
            client.shadow(str(tmp / "worse.yaml"), str(path), level=1.0)


def test_bad_input_is_a_usage_error(
    served: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, tmp = served
    better = str(tmp / "better.yaml")
    args = ["shadow", "-f", better, "--server", url]
    assert cli_main([*args, "--data", "regr", "--store", "x.db"]) == 2
    assert "--store cannot be combined with --server" in capsys.readouterr().err
    assert cli_main([*args, "--data", "nope"]) == 2
    assert "neither a file here nor a dataset" in capsys.readouterr().err
    empty = tmp / "empty.jsonl"
    empty.write_text("")
    assert cli_main([*args, "--data", str(empty)]) == 2
    assert "no rows" in capsys.readouterr().err


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents-shadow"


def _agent_doc(name: str, url: str) -> dict[str, Any]:
    """The example's spec (``examples/agents-shadow/<name>.yaml``) against the stub at url."""
    import yaml

    doc: dict[str, Any] = yaml.safe_load((EXAMPLE / f"{name}.yaml").read_text())
    doc["spec"]["target"]["agent"]["model"]["baseUrl"] = url
    doc["spec"]["dataset"]["path"] = str(EXAMPLE / "tasks.jsonl")
    return doc


def test_an_agents_failing_tasks_promoted_and_shadowed_on_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.stub_llm import OPENAI_PATH, StubLLM

    monkeypatch.syspath_prepend(str(EXAMPLE))  # the agent's tool, imported by the server
    scripts = {
        n: json.loads((EXAMPLE / f"{n}-script.json").read_text()) for n in ("recorded", "better")
    }
    with (
        StubLLM(**scripts["recorded"]) as recorded,
        StubLLM(**scripts["better"]) as better,
        serving(server_state(tmp_path, allow_python_targets=True)) as server,
        evalsi.Client(server.url) as client,
    ):
        run = client.create_run(_agent_doc("recorded", recorded.openai_url))
        assert run.status == "done", run
        done = client.promote("agent-regr", run_id=run.run_id, failing_only=True)
        assert done["rows_added"] == 3
        rows = client.get_dataset("agent-regr", page_size=100).rows  # trajectories and all
        assert sorted(r["id"] for r in rows) == ["hanoi", "lima", "riga"]
        assert all(r["trajectory"]["steps"] for r in rows)
        spec = tmp_path / "better.json"
        spec.write_text(json.dumps(_agent_doc("better", better.openai_url)))
        code = cli_main(
            ["shadow", "-f", str(spec), "--data", "agent-regr", "--server", server.url,
             "--format", "json"]
        )  # fmt: skip
        doc = json.loads(capsys.readouterr().out)
        assert code == 0
        (m,) = doc["comparison"]["metrics"]
        assert (m["n_paired"], m["mean_a"], m["mean_b"]) == (3, 0.0, 1.0)
        assert better.calls(OPENAI_PATH) == 6  # the candidate asked its own model
        tasks = [t for page in client.list_run_tasks(doc["candidate_run"]) for t in page]
        recorded_answers = {r["id"]: r["output"] for r in rows}
        for task in tasks:
            assert task["output"] != recorded_answers[task["sample_id"]]
            assert [s["type"] for s in task["trajectory"]["steps"]].count("tool_call") == 1
