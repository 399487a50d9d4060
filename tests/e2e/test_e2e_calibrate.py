"""`evalsi calibrate` as a user runs it: the stub LLM server is the judge, scripted with the
verdicts each test chooses; the JSON contract, the table, exit codes, bad labels, and the
report warning on a gate whose judge is not calibrated."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sklearn.metrics import cohen_kappa_score

from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM
from tests.unit.runs.calibration.calibration_support import (
    PAIRS,
    QA,
    RUBRIC,
    UNSCRIPTED,
    pair_answers,
    pair_rows,
    qa_answers,
    qa_rows,
    rating_answers,
    rating_rows,
    write_jsonl,
)

SCALE = "[1,2,3,4,5]"


def _judges(tmp_path: Path, stub: StubLLM) -> None:
    (tmp_path / "judges.yaml").write_text(
        f"default: {{connector: openai-compatible, baseUrl: '{stub.openai_url}', model: j, "
        "params: {temperature: 0}}\n"
    )


def test_calibrate_prints_one_json_object_and_stores_the_calibration(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "labels.jsonl", qa_rows())
    args = ["calibrate", "--judge", "reference-correctness", "--labels", "labels.jsonl",
            "--judges", "judges.yaml"]  # fmt: skip
    with StubLLM(answers=qa_answers(), default=UNSCRIPTED) as stub:
        _judges(tmp_path, stub)
        proc = run_evalsi(tmp_path, *args, "--format", "json")
        table = run_evalsi(tmp_path, *args)  # cached answers: no new judge call
        assert stub.calls(OPENAI_PATH) == len(QA)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)  # nothing else on stdout
    assert set(out) >= {
        "calibration_id", "run_id", "evaluator", "metric", "kind", "judge", "labels", "records",
        "compared", "skipped", "errors", "infra_errors", "agreement", "position_bias",
        "length_bias", "warnings",
    }  # fmt: skip
    assert out["calibration_id"].startswith("cal-")
    assert (out["records"], out["compared"], out["kind"]) == (16, 16, "passed")
    human, judge = [q[3] for q in QA], [q[4] for q in QA]
    kappa = out["agreement"]["cohen_kappa"]
    assert abs(kappa["value"] - cohen_kappa_score(human, judge)) < 1e-12
    assert kappa["ci_method"] == "bootstrap-percentile"
    assert out["labels"]["source"].endswith("labels.jsonl")
    assert out["judge"]["template"] == "reference-correctness/v1"
    assert table.returncode == 0, table.stderr
    assert "accuracy" in table.stdout
    assert "Cohen's kappa" in table.stdout
    assert "length bias" in table.stdout
    listed = run_evalsi(tmp_path, "runs", "show", out["run_id"], "--format", "json")
    assert listed.returncode == 0, listed.stderr  # the judge's scores are an ordinary run


def test_pairwise_calibration_reports_position_bias(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "prefs.jsonl", pair_rows())
    with StubLLM(answers=pair_answers(), default=UNSCRIPTED) as stub:
        _judges(tmp_path, stub)
        proc = run_evalsi(
            tmp_path, "calibrate", "--judge", "pairwise", "--labels", "prefs.jsonl",
            "--judges", "judges.yaml", "--format", "md",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| position bias: verdict flips with order |" in proc.stdout
    flips = sum(
        {"A": "output", "B": "baseline", "tie": "tie"}[p[4]]
        != {"A": "baseline", "B": "output", "tie": "tie"}[p[5]]
        for p in PAIRS
    )
    row = next(r for r in proc.stdout.splitlines() if "verdict flips" in r)
    assert f"| {flips / len(PAIRS):.3f} |" in row


def test_a_report_warns_about_a_gate_on_an_uncalibrated_judge(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "ratings.jsonl", rating_rows())
    answers = [{k: v for k, v in r.items() if k != "labels"} for r in rating_rows()]
    write_jsonl(tmp_path / "answers.jsonl", answers)
    gate = "metric('llm-judge').mean >= 0.25"
    with StubLLM(answers=rating_answers([1, 2, 3, 4, 5]), default=UNSCRIPTED) as stub:
        _judges(tmp_path, stub)
        run = run_evalsi(
            tmp_path, "eval", "--data", "answers.jsonl", "--evaluators", "llm-judge",
            "--param", f"llm-judge.rubric={RUBRIC}", "--param", f"llm-judge.scale={SCALE}",
            "--judges", "judges.yaml", "--gate", gate, "--format", "json",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        run_id = json.loads(run.stdout)["run_id"]
        before = run_evalsi(tmp_path, "report", run_id, "-o", "-", "--format", "md")
        calibrated = run_evalsi(
            tmp_path, "calibrate", "--judge", "llm-judge", "--labels", "ratings.jsonl",
            "--param", f"rubric={RUBRIC}", "--param", f"llm-judge.scale={SCALE}",
            "--judges", "judges.yaml", "--format", "json",
        )  # fmt: skip
        after = run_evalsi(tmp_path, "report", run_id, "-o", "-", "--format", "md")
    assert before.returncode == 0, before.stderr
    assert "not calibrated" in before.stdout
    assert "evalsi calibrate --judge llm-judge" in before.stdout
    assert calibrated.returncode == 0, calibrated.stderr
    assert json.loads(calibrated.stdout)["agreement"]["krippendorff_alpha"]["humans"] is not None
    assert after.returncode == 0, after.stderr
    assert "not calibrated" not in after.stdout


def test_bad_labels_and_bad_flags_exit_2_without_a_traceback(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    rows = qa_rows()
    rows[2]["label"] = "yes"  # a string among true/false labels
    write_jsonl(tmp_path / "labels.jsonl", rows)
    base = ["calibrate", "--judge", "reference-correctness", "--labels", "labels.jsonl"]
    with StubLLM(default=UNSCRIPTED) as stub:
        _judges(tmp_path, stub)
        bad = run_evalsi(tmp_path, *base, "--judges", "judges.yaml", "--format", "json")
        no_judge = run_evalsi(tmp_path, "calibrate", "--judge", "exact-match", "--labels",
                              "labels.jsonl", "--judges", "judges.yaml")  # fmt: skip
        bad_param = run_evalsi(tmp_path, *base, "--judges", "judges.yaml", "--param", "oops")
        assert stub.calls(OPENAI_PATH) == 0
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert "labels.jsonl:3: field 'label': a category (a string), but line 1 gave" in bad.stderr
    assert no_judge.returncode == 2
    assert "does not ask a judge model" in no_judge.stderr
    assert bad_param.returncode == 2
    assert "expected KEY=VALUE" in bad_param.stderr
    missing = run_evalsi(tmp_path, *base)
    assert missing.returncode == 2
    assert "no default judge" in missing.stderr
    for proc in (bad, no_judge, bad_param, missing):
        assert "Traceback" not in proc.stderr


def test_an_unreachable_judge_exits_3(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    write_jsonl(tmp_path / "labels.jsonl", qa_rows()[:2])
    with StubLLM(default=UNSCRIPTED) as stub:
        stub.schedule(*[Fault(status=503, retry_after="0")] * 60, path=OPENAI_PATH)
        _judges(tmp_path, stub)
        proc = run_evalsi(
            tmp_path, "calibrate", "--judge", "reference-correctness", "--labels",
            "labels.jsonl", "--judges", "judges.yaml", "--format", "json",
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["compared"], out["infra_errors"], out["calibration_id"]) == (0, 2, None)
    assert "2 of 2 records were not compared" in proc.stderr


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "calibration"


def test_the_example_labels_files_calibrate(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    cases = [
        ("correctness.jsonl", ["--judge", "reference-correctness"], '{"correct": true}'),
        (
            "ratings.jsonl",
            ["--judge", "llm-judge", "--param", f"rubric={RUBRIC}", "--param", f"scale={SCALE}"],
            '{"score": 4, "explanation": "clear"}',
        ),
        ("preferences.jsonl", ["--judge", "pairwise"], '{"preferred": "A"}'),
    ]
    for name, flags, verdict in cases:
        with StubLLM(default=verdict) as stub:
            _judges(tmp_path, stub)
            proc = run_evalsi(
                tmp_path, "calibrate", "--labels", EXAMPLES / name, *flags,
                "--judges", "judges.yaml", "--format", "json",
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["compared"] == out["records"] > 0
    # a judge that always picks the response shown first: every pair flips, position A = 1
    assert out["position_bias"]["flip_rate"]["value"] == 1.0
    assert out["position_bias"]["position_a_rate"]["value"] == 1.0
