"""``spec.sinks`` as written, ``evalsi export --to`` forms and ``--sinks`` files: each bad entry
named with its field; a sink's URLs through the server's egress policy; sinks never change
the run's work (its hash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.connectors import EgressDenied, EgressPolicy
from evalsi.core import SpecError, UserError
from evalsi.server._egress import check_run_egress
from evalsi.sinks import ResultRow, open_sink, result_rows
from evalsi.specs import SinkSpec, load_sinks, run_spec_from_dict, sink_of, work_document


def _doc(sinks: Any) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "s"},
        "spec": {
            "target": {"http": {"url": "https://app.example/x", "output": "$.a"}},
            "dataset": {"path": "/dev/null"},
            "evaluators": [{"ref": "exact-match"}],
            "sinks": sinks,
        },
    }


def test_every_kind_loads_with_its_options() -> None:
    spec = run_spec_from_dict(
        _doc(
            [
                {"mlflow": {"trackingUri": "http://127.0.0.1:5000", "experiment": "e"}},
                {"s3": {"bucket": "evals", "prefix": "a/b", "endpointUrl": "http://127.0.0.1:9"}},
                {"webhook": {"url": "https://hooks.example/x", "secretRef": "env:HOOK"}},
                {"wandb": {"project": "p", "mode": "offline"}},
            ]
        )
    )
    assert [s.kind for s in spec.sinks] == ["mlflow", "s3", "webhook", "wandb"]
    assert spec.sinks[1].describe() == "s3 evals/a/b"
    assert spec.sinks[2].options["secretRef"] == "env:HOOK"


@pytest.mark.parametrize(
    ("sinks", "expected"),
    [
        ([{}], "should be non-empty"),
        ([{"mlflow": {"trackingUri": "http://x"}, "s3": {"bucket": "abc"}}], "only one of"),
        ([{"mlflow": {}}], "missing required field 'trackingUri'"),
        ([{"mlflow": {"trackingUri": "file:///etc"}}], "trackingUri"),
        ([{"s3": {"bucket": "Bad_Bucket"}}], "bucket"),
        ([{"webhook": {"url": "http://x", "secretRef": "hunter2"}}], "secretRef"),
        ([{"webhook": {"url": "http://x", "timeoutSeconds": 0}}], "timeoutSeconds"),
        ([{"wandb": {"project": "p", "mode": "cloud"}}], "mode"),
        ([{"kafka": {"topic": "t"}}], "kafka"),
        ({"mlflow": {}}, "sinks"),
    ],
)
def test_a_bad_entry_is_named(sinks: Any, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        run_spec_from_dict(_doc(sinks))


def test_sinks_are_not_the_runs_work() -> None:
    with_sinks = _doc([{"wandb": {"project": "p"}}])
    without = _doc([])
    del without["spec"]["sinks"]
    assert work_document(with_sinks) == work_document(without)


@pytest.mark.parametrize(
    ("text", "kind", "options"),
    [
        ("mlflow:http://127.0.0.1:5000", "mlflow", {"trackingUri": "http://127.0.0.1:5000"}),
        ("s3://evals", "s3", {"bucket": "evals"}),
        ("s3://evals/nightly/x", "s3", {"bucket": "evals", "prefix": "nightly/x"}),
        ("webhook:https://h.example/p", "webhook", {"url": "https://h.example/p"}),
        ("wandb:my-project", "wandb", {"project": "my-project"}),
    ],
)
def test_to_forms(text: str, kind: str, options: dict[str, str]) -> None:
    assert sink_of(text) == SinkSpec(kind, options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ["", "mlflow", "ftp://x", "s3:evals", "s3://", "mlflow:ftp://x", "wandb:", "x:y"]
)
def test_bad_to_forms_are_user_errors(text: str) -> None:
    with pytest.raises(UserError):
        sink_of(text)


def test_a_sinks_file_names_its_line(tmp_path: Path) -> None:
    good = tmp_path / "sinks.yaml"
    good.write_text("sinks:\n  - s3: {bucket: evals}\n  - wandb: {project: p}\n")
    assert [s.kind for s in load_sinks(good)] == ["s3", "wandb"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("sinks:\n  - s3: {bucket: evals}\n  - webhook: {url: nope}\n")
    with pytest.raises(SpecError, match=r"bad.yaml:3: sinks\[1\].webhook.url"):
        load_sinks(bad)
    with pytest.raises(SpecError, match="not found"):
        load_sinks(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        (
            {"mlflow": {"trackingUri": "http://169.254.169.254/latest"}},
            "sinks[0].mlflow.trackingUri",
        ),
        ({"webhook": {"url": "http://169.254.169.254/x"}}, "sinks[0].webhook.url"),
        (
            {"s3": {"bucket": "evals", "endpointUrl": "http://169.254.169.254"}},
            "sinks[0].s3.endpointUrl",
        ),
    ],
)
def test_a_servers_egress_policy_checks_every_sink_url(entry: dict[str, Any], where: str) -> None:
    spec = run_spec_from_dict(_doc([entry]))
    with pytest.raises(EgressDenied, match=where.replace("[", r"\[").replace("]", r"\]")):
        check_run_egress(spec, EgressPolicy(listen_host="0.0.0.0"))


def test_result_rows_flatten_scores() -> None:
    from evalsi.core import EvaluationResult, Outcome, Score

    scored = EvaluationResult(
        "r1", "judge", "b/judge@1", Outcome.SCORED,
        [Score(name="a", passed=True), Score(name="b", number=0.25, explanation="why")],
    )  # fmt: skip
    skipped = EvaluationResult("r2", "judge", "b/judge@1", Outcome.SKIPPED, [], reason="no ref")
    assert result_rows(scored) == [
        ResultRow("r1", 0, "judge", "a", "scored", 1.0, None, "", passed=True),
        ResultRow("r1", 0, "judge", "b", "scored", 0.25, None, "why"),
    ]
    assert result_rows(skipped) == [
        ResultRow("r2", 0, "judge", "judge", "skipped", None, None, "no ref")
    ]


def test_an_unknown_kind_is_refused_by_the_factory() -> None:
    with pytest.raises(ValueError, match="no sink kind"):
        open_sink("kafka", {})
