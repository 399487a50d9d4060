"""Loading OnlineEvalPolicy specs: the example loads; every bad spec names its field and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError
from evalsi.policies._spec import load_policy, policy_from_dict, policy_from_yaml
from tests.support.registry import BUILTINS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "watch" / "policy.yaml"

HEAD = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: p}
spec:
"""


def bad(body: str) -> str:
    with pytest.raises(SpecError) as err:
        policy_from_yaml(HEAD + body, source="p.yaml", registry=BUILTINS)
    return str(err.value)


def test_the_example_policy_loads_as_written() -> None:
    p = load_policy(EXAMPLE, registry=BUILTINS)
    assert (p.name, p.project, p.rate, p.window_s) == ("prod-support-agent", "support", 0.05, 300)
    assert [(r.kind, r.quantile) for r in p.always] == [
        ("cel", 0.0),
        ("feedback", 0.0),
        ("latency", 0.99),
    ]
    assert [s.name for s in p.cascade] == ["pii-leakage", "llm-judge"]
    assert p.cascade[1].when == "scores.all(s, s.passed)"
    assert p.alerts[0].cooldown_s == 1800
    assert p.alerts[0].name == "helpfulness-drop"
    assert p.promote is not None
    assert p.promote.dataset == "support-regressions"
    assert p.judges["default"].model == "my-judge"


def test_the_same_document_has_the_same_hash_and_a_change_changes_it() -> None:
    doc: dict[str, Any] = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "OnlineEvalPolicy",
        "metadata": {"name": "p"},
        "spec": {"cascade": [{"ref": "contains", "params": {"values": ["a"]}}]},
    }
    a, b = (
        policy_from_dict(doc, registry=BUILTINS),
        policy_from_dict(json.loads(json.dumps(doc)), registry=BUILTINS),
    )
    assert a.spec_hash == b.spec_hash
    doc["spec"]["sampling"] = {"rate": 0.5}
    assert policy_from_dict(doc, registry=BUILTINS).spec_hash != a.spec_hash
    assert (
        policy_from_dict(doc, project="other", registry=BUILTINS).spec_hash
        != policy_from_dict(doc, registry=BUILTINS).spec_hash
    )
    assert a.rate == 1.0  # no sampling section: every selected trace is graded


def test_an_unknown_field_is_named_with_its_line() -> None:
    text = bad("  cascade: [{ref: contains}]\n  colour: red\n")
    assert "p.yaml:6: spec.colour: unknown field 'colour'" in text
    text = bad("  cascade: [{ref: contains, wen: 'true'}]\n")
    assert "spec.cascade[0].wen: unknown field 'wen' (did you mean when?)" in text


def test_a_rate_above_one_is_refused() -> None:
    text = bad("  sampling: {rate: 1.5}\n  cascade: [{ref: contains}]\n")
    assert "p.yaml:5: spec.sampling.rate: expected a value <= 1, got 1.5" in text


def test_an_unknown_evaluator_names_the_ref() -> None:
    text = bad("  cascade:\n    - {ref: contains}\n    - {ref: no-such-metric}\n")
    assert "p.yaml:7: spec.cascade[1].ref: unknown evaluator 'no-such-metric'" in text


def test_bad_params_name_the_params() -> None:
    text = bad("  cascade: [{ref: length, params: {unit: furlongs}}]\n")
    assert "spec.cascade[0].params:" in text
    assert "furlongs" in text


def test_a_dataset_scope_evaluator_grades_the_window_in_the_cascade_only() -> None:
    p = policy_from_yaml(
        HEAD + "  cascade: [{ref: f1}, {ref: exact-match}]\n", source="p.yaml", registry=BUILTINS
    )
    assert [s.corpus for s in p.cascade] == [True, False]
    text = bad("  cascade: [{ref: exact-match}]\n  onFeedback: [{ref: f1}]\n")
    assert "spec.onFeedback[0].ref: f1 is a dataset-scope evaluator; onFeedback grades" in text


def test_a_corpus_metric_has_no_score_per_trace_for_a_when_or_promote() -> None:
    text = bad("  cascade: [{ref: f1}, {ref: exact-match, when: \"score('f1') > 0.5\"}]\n")
    assert "spec.cascade[1].when" in text
    assert "f1" in text
    text = bad("  cascade: [{ref: f1}]\n  promote: {when: \"score('f1') > 0.5\", dataset: d}\n")
    assert "spec.promote.when" in text
    assert "f1" in text
    # alerts read the window, where the corpus metric lives
    policy_from_yaml(
        HEAD + "  cascade: [{ref: f1}]\n  alerts: [{when: \"mean('f1') < 0.5\", "
        "notify: 'http://example.com/h'}]\n",
        source="p.yaml",
        registry=BUILTINS,
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  selector: 'span.name ==='\n", "spec.selector: not valid CEL"),
        ("  selector: 'foo.bar == 1'\n", "spec.selector: unknown name 'foo'"),
        ("  selector: 'span.name'\n", "spec.selector: gives str, not true or false"),
        ("  selector: 'shout(span.name)'\n", "spec.selector: unknown function 'shout'"),
        ("  sampling: {always: ['latency > p100']}\n", "spec.sampling.always[0]: expected a"),
        ("  sampling: {always: ['feedback.positive']}\n", "spec.sampling.always[0]: unknown name"),
        ("  window: 5 minutes\n", "spec.window: expected a duration"),
        ("  window: soon\n", "spec.window: expected a duration"),
        ("  window: 48h\n", "spec.window: expected a window from 1s to 24h"),
    ],
)
def test_bad_conditions_and_durations_name_their_field(body: str, expected: str) -> None:
    assert expected in bad(body + "  cascade: [{ref: contains}]\n")


def test_a_when_may_read_only_earlier_steps() -> None:
    text = bad(
        "  cascade:\n    - {ref: contains, when: \"score('length') > 3.0\"}\n    - {ref: length}\n"
    )
    assert "p.yaml:6: spec.cascade[0].when: score('length'): no evaluator 'length'" in text
    # the same condition on the later step is fine
    policy_from_yaml(
        HEAD + "  cascade:\n    - {ref: length}\n"
        "    - {ref: contains, when: \"score('length') > 3.0 && passed('length') != false\"}\n",
        registry=BUILTINS,
    )


def test_alerts_check_their_url_condition_and_names() -> None:
    text = bad(
        "  cascade: [{ref: contains}]\n"
        "  alerts:\n"
        "    - {when: \"mean('contains') < 0.5\", notify: 'slack://oncall'}\n"
        "    - {when: \"rate('judge') < 0.5\", notify: 'https://hooks.example/x'}\n"
        "    - {when: \"mean('contains')\", notify: 'https://hooks.example/x'}\n"
        "    - {when: 'n > 1', notify: 'http://hooks.example:99999999/x'}\n"
        "    - {when: 'n > 1', notify: 'https://:443/x'}\n"
    )
    assert "spec.alerts[0].notify: expected an http:// or https:// webhook URL" in text
    assert "spec.alerts[1].when: rate('judge'): no evaluator 'judge'" in text
    assert "spec.alerts[2].when: gives float, not true or false" in text
    assert "spec.alerts[3].notify: expected an http:// or https:// webhook URL" in text
    assert "spec.alerts[4].notify: expected an http:// or https:// webhook URL" in text


def test_alert_names_are_distinct() -> None:
    text = bad(
        "  cascade: [{ref: contains}]\n"
        "  alerts:\n"
        "    - {name: alert-1, when: 'n > 1', notify: 'https://hooks.example/x'}\n"
        "    - {when: 'n > 2', notify: 'https://hooks.example/x'}\n"  # alert-1 by default
        "    - {name: low, when: 'n > 3', notify: 'https://hooks.example/x'}\n"
        "    - {name: low, when: 'n > 4', notify: 'https://hooks.example/x'}\n"
    )
    assert "spec.alerts[1].name: alert name 'alert-1' is used twice" in text
    assert "spec.alerts[3].name: alert name 'low' is used twice" in text
    # a CEL error that only the data can raise (x / 0 at n = 0) is decided per window
    policy_from_yaml(
        HEAD + "  cascade: [{ref: contains}]\n"
        "  alerts: [{when: \"count('contains') * 100 / n < 50\", notify: 'https://h.example/x'}]\n",
        registry=BUILTINS,
    )


def test_promote_checks_the_dataset_name() -> None:
    text = bad(
        "  cascade: [{ref: contains}]\n"
        "  promote: {when: \"passed('contains') == false\", dataset: 'Bad Name'}\n"
    )
    assert "spec.promote.dataset: expected a dataset name" in text


def test_duplicate_instance_names_are_refused() -> None:
    text = bad("  cascade: [{ref: contains}, {ref: contains}]\n")
    assert "'contains' appears twice" in text


def test_the_wrong_kind_says_which_command_takes_it() -> None:
    with pytest.raises(SpecError) as err:
        policy_from_yaml(
            HEAD.replace("OnlineEvalPolicy", "EvalRun") + "  cascade: []\n", registry=BUILTINS
        )
    assert "kind: expected 'OnlineEvalPolicy', got 'EvalRun'" in str(err.value)


def test_the_project_label_must_be_a_project_id() -> None:
    policy = policy_from_yaml(
        HEAD.replace("{name: p}", "{name: p, labels: {evals.si/project: team-a}}")
        + "  cascade: [{ref: contains}]\n",
        registry=BUILTINS,
    )
    assert policy.project == "team-a"
    with pytest.raises(SpecError) as err:
        policy_from_yaml(
            HEAD.replace("{name: p}", "{name: p, labels: {evals.si/project: 'no way'}}")
            + "  cascade: [{ref: contains}]\n",
            registry=BUILTINS,
        )
    assert 'metadata.labels["evals.si/project"]: project_id' in str(err.value)


def test_the_generated_schema_is_the_one_the_loader_reads() -> None:
    schema = ROOT / "src" / "evalsi" / "specs" / "schemas" / "onlineevalpolicy.schema.json"
    doc = json.loads(schema.read_text())
    assert doc["title"] == "OnlineEvalPolicy"
    spec = doc["$defs"]["evalsi.v1alpha1.OnlineEvalPolicySpec"]
    assert spec["additionalProperties"] is False
    assert spec["required"] == ["cascade"]


def test_the_committed_schema_is_fresh(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = ROOT / "scripts" / "gen_schema.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    name = "onlineevalpolicy.schema.json"
    committed = ROOT / "src" / "evalsi" / "specs" / "schemas" / name
    assert (tmp_path / name).read_text() == committed.read_text()


def test_the_example_round_trips_through_the_proto_message() -> None:
    from google.protobuf import json_format

    from evalsi._proto.evalsi.v1alpha1 import policy_pb2

    spec = load_policy(EXAMPLE, registry=BUILTINS)
    message = json_format.ParseDict(spec.raw, policy_pb2.OnlineEvalPolicy())
    assert message.spec.sampling.rate == 0.05
    assert message.spec.cascade[1].when == "scores.all(s, s.passed)"
    back = policy_from_dict(json_format.MessageToDict(message), registry=BUILTINS)
    assert back.spec_hash == spec.spec_hash
