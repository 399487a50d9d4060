"""The Action's steps (``python -m evalsi.ci``) as a base-branch job and a pull request's job
run them: a fake event file and ``$GITHUB_OUTPUT``, a loopback GitHub, the real CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.ci import MARKER, main
from tests.support.stub_github import StubGitHub

GATE = "metric('exact-match').mean >= 0.7"
# the whole comment of the pull request below, run ids and the temporary directory replaced
SRC = Path(__file__).resolve().parents[3] / "src"
GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "ci" / "comment.md"


def _dataset(path: Path, right: int, n: int = 20) -> Path:
    rows = [
        {"id": f"q{i}", "output": "yes" if i < right else "no", "reference": "yes"}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Job:
    """One GitHub Actions job: its event, its outputs file, the steps it runs."""

    def __init__(self, tmp: Path, github: StubGitHub, event: dict[str, object], name: str):
        self.dir = tmp / name
        self.dir.mkdir()
        self.event = self.dir / "event.json"
        self.event.write_text(json.dumps(event))
        self.output = self.dir / "github_output"
        self.summary = self.dir / "step_summary"
        self.env = {
            "GITHUB_API_URL": github.url,
            "GITHUB_REPOSITORY": github.repository,
            "GITHUB_EVENT_NAME": "pull_request" if "pull_request" in event else "push",
            "GITHUB_EVENT_PATH": str(self.event),
            "GITHUB_OUTPUT": str(self.output),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "EVALSI_CI_GITHUB_TOKEN": "ghs_secret",
            "EVALSI_CI_STORE": str(self.dir / ".evalsi" / "evalsi.db"),
            "EVALSI_CI_BASELINE_ARTIFACT": "evalsi-baseline",
            "EVALSI_CI_COMMENT_FILE": str(self.dir / "comment.md"),
        }

    def step(self, name: str, **inputs: str) -> tuple[int, dict[str, str]]:
        env = dict(self.env)
        env.update({"EVALSI_CI_" + k.upper(): v for k, v in inputs.items()})
        self.output.write_text("")
        code = main([name], env)
        lines = self.output.read_text().splitlines()
        return code, dict(line.split("=", 1) for line in lines)


@pytest.fixture
def github() -> Iterator[StubGitHub]:
    with StubGitHub() as stub:
        yield stub


def _push_job(tmp: Path, github: StubGitHub, monkeypatch: pytest.MonkeyPatch) -> str:
    """The base branch's job: run, gate, upload the store as the baseline artifact."""
    job = Job(tmp, github, {"ref": "refs/heads/main"}, "base")
    monkeypatch.chdir(job.dir)
    data = _dataset(tmp / "base.jsonl", right=18)
    code, prepared = job.step("prepare")
    assert (code, prepared["baseline-run"]) == (0, "")  # a push compares with nothing
    code, ran = job.step("run", eval=f'--data {data} --evaluators exact-match --gate "{GATE}"')
    assert (code, ran["exit-code"], ran["outcome"]) == (0, "0", "passed")
    store = Path(job.env["EVALSI_CI_STORE"]).read_bytes()
    github.add_artifact("evalsi-baseline", "main", {"evalsi.db": store}, "2026-12-01T10:00:00Z")
    return ran["run-id"]


def _pr_event(number: int = 7) -> dict[str, object]:
    return {"pull_request": {"number": number, "base": {"ref": "main"}, "head": {"ref": "x"}}}


def test_a_pull_request_is_compared_with_its_base_branch_and_commented_once(
    tmp_path: Path, github: StubGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_run = _push_job(tmp_path, github, monkeypatch)
    # an older baseline, another branch's, a fork's, an expired one: none is the one wanted
    github.add_artifact("evalsi-baseline", "main", {"evalsi.db": b"old"}, "2026-11-01T00:00:00Z")
    github.add_artifact("evalsi-baseline", "dev", {"evalsi.db": b"dev"}, "2026-12-02T00:00:00Z")
    # a fork's pull request from its own "main", uploading under the same name: not a baseline
    fork = {"evalsi.db": b"poisoned"}
    github.add_artifact("evalsi-baseline", "main", fork, "2026-12-03T00:00:00Z", fork=True)
    github.add_artifact("evalsi-baseline", "main", fork, "2026-12-04T00:00:00Z", expired=True)

    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    code, prepared = job.step("prepare")
    assert code == 0
    assert prepared["baseline-run"] == base_run
    assert "artifact evalsi-baseline" in prepared["baseline-source"]
    data = _dataset(tmp_path / "pr.jsonl", right=10)  # the change breaks 8 answers
    code, ran = job.step("run", eval=f'--data {data} --evaluators exact-match --gate "{GATE}"')
    assert (code, ran["exit-code"], ran["outcome"]) == (0, "1", "gate failed")
    assert ran["run-id"]
    assert ran["run-id"] != base_run
    code, reported = job.step("report", run_id=ran["run-id"], baseline_run=base_run)
    assert code == 0
    html = Path(reported["report-path"]).read_text()
    assert base_run in html
    assert "<html" in html
    url = "https://github.test/acme/bot/actions/runs/1/artifacts/9"
    inputs = {"run_id": ran["run-id"], "baseline_run": base_run, "exit_code": "1"}
    code, commented = job.step("comment", report_url=url, **inputs)
    assert code == 0
    assert commented["comment-url"].startswith("https://github.test/acme/bot/pull/7#c")

    body = Path(commented["comment-file"]).read_text()
    assert body.startswith(MARKER + "\n**evalsi: gate failed** (exit 1)")
    # the delta table, its interval column and the paired row: A 0.9, B 0.5, Δ −0.4
    assert "#### Comparison with run `" + base_run + "`" in body
    assert (
        "| evaluator | metric | pairs | A | B | Δ | 95% CI of Δ | p | McNemar p | verdict |" in body
    )
    row = re.search(r"^\| exact-match \| exact-match \| 20 \| 0\.900 \| 0\.500 \| -0\.400 \| (.*)$",
                    body, re.MULTILINE)  # fmt: skip
    assert row, body
    low, high = map(float, re.findall(r"-?\d\.\d+", row.group(1).split("|")[0]))
    assert low < -0.4 < high < 0
    # the gate line with its verdict, and the report's link
    assert f"| `{GATE}` | **failed** | 0.500 |" in body
    assert f"[Full report (HTML)]({url})" in body
    golden = GOLDEN.read_text()
    normal = body.replace(base_run, "RUN-A").replace(ran["run-id"], "RUN-B")
    assert normal.replace(str(tmp_path), "TMP") == golden
    assert "Manifest" not in body
    assert "Failures" not in body
    assert job.summary.read_text().startswith("**evalsi: gate failed**")

    # pushed again: the same comment is updated, no second one
    code, again = job.step("comment", report_url=url, **{**inputs, "exit_code": "0"})
    assert code == 0
    assert again["comment-url"] == commented["comment-url"]
    assert len(github.comments[7]) == 1
    assert github.comments[7][0]["body"].startswith(MARKER + "\n**evalsi: passed**")
    methods = [(c.method, c.path.rsplit("/", 2)[-2]) for c in github.calls if "issues" in c.path]
    assert ("POST", "7") in methods
    assert ("PATCH", "comments") in methods
    # the token went to the API and never to blob storage
    assert all(c.authorization == "Bearer ghs_secret" for c in github.calls if "repos" in c.path)
    assert [c.authorization for c in github.calls if c.path.startswith("/blob/")] == [None]


def test_a_comment_found_on_a_later_page_is_the_one_updated(
    tmp_path: Path, github: StubGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    github.comments[7] = [{"id": i, "body": f"chatter {i}"} for i in range(150)]
    github.comments[7].append({"id": 999, "body": f"{MARKER}\nold", "html_url": "u999"})
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    code, out = job.step("comment", exit_code="3")  # nothing was stored
    assert (code, out["comment-url"]) == (0, "u999")
    assert len(github.comments[7]) == 151
    body = github.comments[7][-1]["body"]
    assert "**evalsi: infrastructure error** (exit 3)" in body
    assert "The run stored nothing" in body
    assert "No baseline run" in body


def test_no_baseline_artifact_yet_is_a_warning_and_no_comparison(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    code, out = job.step("prepare")
    assert (code, out["baseline-run"]) == (0, "")
    assert "::warning title=evalsi::no artifact 'evalsi-baseline' from branch 'main'" in (
        capsys.readouterr().out
    )
    data = _dataset(tmp_path / "d.jsonl", right=20)
    code, ran = job.step("run", eval=f"--data {data} --evaluators exact-match")
    assert ran["exit-code"] == "0"
    code, out = job.step("comment", run_id=ran["run-id"], exit_code="0")
    body = Path(out["comment-file"]).read_text()
    assert "Comparison" not in body
    assert "_No baseline run" in body
    assert "| exact-match | exact-match | 20 | 1.000 |" in body  # the metrics table, with its CI


def test_an_unreadable_baseline_is_a_warning_and_the_run_goes_on(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    github.add_artifact("evalsi-baseline", "main", {"evalsi.db": b"junk"}, "2026-12-01T00:00:00Z")
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    code, out = job.step("prepare")
    assert (code, out["baseline-run"]) == (0, "")
    assert "file is not a database" in capsys.readouterr().out
    assert not Path(out["store"]).exists()  # the run starts a store of its own
    data = _dataset(tmp_path / "d.jsonl", right=20)
    code, ran = job.step("run", eval=f"--data {data} --evaluators exact-match")
    assert (code, ran["exit-code"]) == (0, "0")
    # a baseline run the user names must exist
    code, _ = job.step("prepare", baseline_run="20990101-000000-000000", baseline_artifact="")
    assert code == 2
    assert "no run '20990101-000000-000000'" in capsys.readouterr().out


def test_a_refused_comment_warns_and_names_the_permission(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    github.refuse_comments = 403
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    code, out = job.step("comment", exit_code="1")
    assert (code, out["comment-url"]) == (0, "")  # the gate decides the job, not the comment
    printed = capsys.readouterr().out
    assert "::warning title=evalsi::the comparison was not posted: GitHub answered GET" in printed
    assert "pull-requests: write" in printed
    assert Path(out["comment-file"]).read_text().startswith(MARKER)


def test_extra_args_and_a_bad_spec_are_passed_on_with_their_exit_codes(
    tmp_path: Path, github: StubGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = Job(tmp_path, github, {"ref": "refs/heads/main"}, "base")
    monkeypatch.chdir(job.dir)
    data = _dataset(tmp_path / "d.jsonl", right=2, n=2)
    gate = "metric('exact-match').n >= 50"
    code, ran = job.step(
        "run",
        eval=f'--data {data} --evaluators exact-match --gate "{gate}"',
        args="--name ci-check",
    )
    assert (code, ran["exit-code"], ran["outcome"]) == (0, "1", "gate failed")
    from evalsi.store import SqlStore

    db = SqlStore.open(job.env["EVALSI_CI_STORE"])
    try:
        assert db.get_run(ran["run-id"]).name == "ci-check"
    finally:
        db.close()
    spec = tmp_path / "run.yaml"
    spec.write_text("apiVersion: nope\n")
    code, ran = job.step("run", spec=str(spec))
    assert (ran["exit-code"], ran["outcome"], ran["run-id"]) == ("2", "cannot judge", "")


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "give exactly one of the inputs `eval`"),
        ({"eval": "--data a", "spec": "b.yaml"}, "give exactly one of the inputs `eval`"),
        ({"eval": "--data a --store x.db"}, "input eval: --store is the action's to set"),
        ({"eval": "--data a --server=http://x"}, "input eval: --server is the action's to set"),
    ],
)
def test_bad_inputs_are_errors_that_name_the_input(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, str],
    message: str,
) -> None:
    job = Job(tmp_path, github, {}, "job")
    monkeypatch.chdir(job.dir)
    code, out = job.step("run", **inputs)
    assert (code, out) == (2, {})
    assert f"::error title=evalsi::{message}" in capsys.readouterr().out


def test_a_store_that_exists_is_not_overwritten_by_the_baseline(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    baseline = tmp_path / "baseline.db"
    baseline.write_bytes(b"x")
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    store = Path(job.env["EVALSI_CI_STORE"])
    store.parent.mkdir(parents=True)
    store.write_bytes(b"mine")
    code, _ = job.step("prepare", baseline_store=str(baseline))
    assert code == 2
    assert store.read_bytes() == b"mine"
    assert "already exists" in capsys.readouterr().out


def test_an_unknown_step_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy"], {}) == 2
    assert "prepare,run,report,comment" in capsys.readouterr().err
    # and `python -m evalsi.ci`, as action.yml calls it, is the same entry
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "evalsi.ci", "comment"],
        env={"PATH": "/usr/bin:/bin", "EVALSI_CI_EXIT_CODE": "one", "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "::error title=evalsi::input exit-code: 'one' is not an exit code" in proc.stdout


def test_a_missing_token_names_the_input(
    tmp_path: Path,
    github: StubGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = Job(tmp_path, github, _pr_event(), "pr")
    monkeypatch.chdir(job.dir)
    job.env["EVALSI_CI_GITHUB_TOKEN"] = ""
    code, _ = job.step("prepare")
    assert code == 2
    assert "github-token" in capsys.readouterr().out
