"""The GitHub Action's steps: ``prepare`` (the baseline), ``run`` (eval or spec), ``comment``.

``action.yml`` at the repository root calls ``python -m evalsi.ci STEP`` for each; everything
it decides lives here, where a test runs it with a fake ``GITHUB_EVENT_PATH`` and
``GITHUB_OUTPUT`` and a loopback GitHub. The inputs arrive as ``EVALSI_CI_*`` variables (a
composite action does not export its inputs; ``action.yml`` maps each one).

The baseline design: a job on the base branch runs the same eval and uploads its result store
as an artifact (``evalsi-baseline``); a pull request's job fetches the newest such artifact of
its base branch, runs its eval *into a copy of that store*, so both runs sit in one store and
``evalsi report RUN --compare BASELINE`` pairs them record by record.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.ci._github import MARKER, GitHub
from evalsi.core import EvalsiError, UserError

# The project's exit-code contract (`evalsi eval --help`), in words for logs and comments.
OUTCOMES = {0: "passed", 1: "gate failed", 2: "cannot judge", 3: "infrastructure error"}
# GitHub refuses a comment body over 65,536 characters.
COMMENT_LIMIT = 65_000
DEFAULT_STORE = ".evalsi/evalsi.db"


@dataclass(frozen=True, slots=True)
class Context:
    """What the job knows: the action's inputs and GitHub's variables."""

    env: Mapping[str, str]

    def input(self, name: str, default: str = "") -> str:
        return self.env.get("EVALSI_CI_" + name.upper().replace("-", "_"), "").strip() or default

    def flag(self, name: str, default: bool) -> bool:
        value = self.input(name, "true" if default else "false").lower()
        if value not in ("true", "false"):
            raise UserError(f"input {name}: {value!r} is not true or false")
        return value == "true"

    @property
    def store(self) -> Path:
        return Path(self.input("store", DEFAULT_STORE)).absolute()

    @property
    def event(self) -> dict[str, Any]:
        path = self.env.get("GITHUB_EVENT_PATH", "")
        if not path or not Path(path).is_file():
            return {}
        try:
            event = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UserError(f"GITHUB_EVENT_PATH {path}: not a JSON event: {e}") from e
        return event if isinstance(event, dict) else {}

    @property
    def pull_request(self) -> dict[str, Any] | None:
        pr = self.event.get("pull_request")
        return pr if isinstance(pr, dict) and "number" in pr else None

    @property
    def base_branch(self) -> str:
        given = self.input("base-branch")
        if given:
            return given
        pr = self.pull_request
        return str(pr["base"]["ref"]) if pr and pr.get("base") else ""

    def github(self) -> GitHub:
        return GitHub(
            self.env.get("GITHUB_API_URL", "https://api.github.com"),
            self.env.get("GITHUB_REPOSITORY", ""),
            self.input("github-token"),
        )


# -- the steps --------------------------------------------------------------------------------


def prepare(ctx: Context) -> dict[str, str]:
    """Put the baseline's runs into the store the run will write to; name the baseline run."""
    store = ctx.store
    source, how = _baseline_store(ctx)
    copied = source is not None and source != store
    if source is not None and copied:
        if store.exists():
            raise UserError(
                f"store {store} already exists, so the baseline's runs cannot be copied into it",
                hint="point the `store` input at a new path: the pull request's run is added to "
                "a copy of the baseline store",
            )
        store.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, store)
    given = ctx.input("baseline-run")
    none = {"baseline-run": "", "baseline-source": "", "store": str(store)}
    if not given and source is None:
        return none
    if not store.exists():
        raise UserError(f"input baseline-run {given}: there is no store at {store}")
    try:
        baseline = _resolve_run(store, given or "latest")
    except EvalsiError as e:
        if given:  # the user named a run: a wrong name is theirs to fix
            raise
        # a saved baseline that cannot be read (or holds no run) must not block every pull
        # request: the run goes on, gated, without a comparison
        warning(f"the baseline store from {how} is not usable: {e}; nothing to compare with")
        if copied:
            store.unlink()
        return none
    how = how or "the store"
    note(f"baseline run {baseline} (from {how})")
    return {"baseline-run": baseline, "baseline-source": how, "store": str(store)}


def run(ctx: Context) -> dict[str, str]:
    """Run the eval or the spec into the store, as the user would; never fail the step (the
    comment comes first), only report the exit code and the new run."""
    command = _command(ctx)
    store = ctx.store
    store.parent.mkdir(parents=True, exist_ok=True)
    before = _newest_run(store)
    note("evalsi " + shlex.join(command))
    code = subprocess.run([sys.executable, "-m", "evalsi", *command], check=False).returncode
    after = _newest_run(store)
    run_id = after if after is not None and after != before else ""
    if code not in OUTCOMES:
        code = 3  # killed, or an unexpected crash: not a verdict on the system
    return {"run-id": run_id, "exit-code": str(code), "outcome": OUTCOMES[code]}


def report(ctx: Context) -> dict[str, str]:
    """The full HTML report of the run (compared with the baseline) for the report artifact."""
    run_id, baseline = ctx.input("run-id"), ctx.input("baseline-run")
    if not run_id:
        return {"report-path": ""}
    folder = Path("evalsi-report").absolute()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.html"
    args = ["report", run_id, "--store", str(ctx.store), "-o", str(path)]
    if baseline and baseline != run_id:
        args += ["--compare", baseline]
    _evalsi(args)
    return {"report-path": str(path)}


def comment(ctx: Context) -> dict[str, str]:
    """Write the comment body (``evalsi report … --format md --summary``), add it to the job
    summary, and post it on the pull request, or update the one posted before."""
    body = comment_body(ctx)
    path = Path(ctx.input("comment-file", "evalsi-comment.md")).absolute()
    path.write_text(body, encoding="utf-8")
    summary = ctx.env.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(body.replace(MARKER, "").lstrip() + "\n")
    out = {"comment-file": str(path), "comment-url": ""}
    pr = ctx.pull_request
    if not ctx.flag("comment", True):
        return out
    if pr is None:
        note(f"not a pull request ({ctx.env.get('GITHUB_EVENT_NAME', '?')}): no comment posted")
        return out
    try:
        posted = ctx.github().upsert_comment(int(pr["number"]), body)
    except EvalsiError as e:  # the verdict stands without a comment; say why there is none
        warning(f"the comparison was not posted: {e}")
        return out
    out["comment-url"] = str(posted.get("html_url") or "")
    note(f"comment: {out['comment-url']}")
    return out


def comment_body(ctx: Context) -> str:
    """The marker, the verdict, the summary report with its comparison, the report's link."""
    given = ctx.input("exit-code", "3")
    if not given.isdigit():
        raise UserError(f"input exit-code: {given!r} is not an exit code (0, 1, 2 or 3)")
    code = int(given)
    run_id = ctx.input("run-id")
    baseline = ctx.input("baseline-run")
    lines = [MARKER, f"**evalsi: {OUTCOMES.get(code, 'infrastructure error')}** (exit {code})", ""]
    if run_id:
        args = ["report", run_id, "--format", "md", "--summary", "--store", str(ctx.store)]
        args += ["--failures", "0", "-o", "-"]
        if baseline and baseline != run_id:
            args += ["--compare", baseline]
        lines.append(_evalsi(args).rstrip())
    else:
        lines.append("The run stored nothing: see the job's log.")
    if not baseline:
        lines += ["", "_No baseline run: nothing to compare with (see docs/guides/ci.md)._"]
    report_url = ctx.input("report-url")
    if report_url:
        lines += ["", f"[Full report (HTML)]({report_url})"]
    body = "\n".join(lines) + "\n"
    if len(body) > COMMENT_LIMIT:
        cut = "\n\n_…cut to fit a GitHub comment; the full report has everything._\n"
        body = body[: COMMENT_LIMIT - len(cut)] + cut
    return body


STEPS = {"prepare": prepare, "run": run, "report": report, "comment": comment}


# -- helpers ----------------------------------------------------------------------------------


def _baseline_store(ctx: Context) -> tuple[Path | None, str]:
    given = ctx.input("baseline-store")
    if given:
        path = Path(given).absolute()
        if not path.is_file():
            warning(f"input baseline-store {given}: no such file; nothing to compare with")
            return None, ""
        return path, f"baseline-store {given}"
    name = ctx.input("baseline-artifact")
    branch = ctx.base_branch
    if not name or not branch:
        return None, ""
    github = ctx.github()
    artifact = github.newest_artifact(name, branch)
    if artifact is None:
        warning(
            f"no artifact {name!r} from branch {branch!r}: nothing to compare with (run the "
            "workflow on the base branch once, with save-baseline)"
        )
        return None, ""
    target = ctx.store.with_name(ctx.store.name + ".baseline")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(github.download_file(artifact, ".db"))
    return target, f"artifact {name} #{artifact.id} of {branch}"


def _command(ctx: Context) -> list[str]:
    eval_args, spec = ctx.input("eval"), ctx.input("spec")
    if bool(eval_args) == bool(spec):
        raise UserError(
            "give exactly one of the inputs `eval` (arguments of evalsi eval) and `spec` (an "
            "EvalRun file for evalsi run -f)"
        )
    args = shlex.split(eval_args) if eval_args else []
    for flag in ("--store", "--server", "--format"):
        if any(a == flag or a.startswith(flag + "=") for a in args):
            raise UserError(
                f"input eval: {flag} is the action's to set",
                hint="the store is the `store` input; a server run is not supported here",
            )
    extra = shlex.split(ctx.input("args"))
    store = ["--store", str(ctx.store)]
    return ["eval", *args, *extra, *store] if args else ["run", "-f", spec, *extra, *store]


def _evalsi(args: list[str]) -> str:
    """``evalsi ARGS``'s standard output; its failure is this step's, with its message."""
    proc = subprocess.run(
        [sys.executable, "-m", "evalsi", *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise UserError(f"evalsi {shlex.join(args)} failed: {proc.stderr.strip()[-800:]}")
    return proc.stdout


def _newest_run(store: Path) -> str | None:
    if not store.exists():
        return None
    from evalsi.runs import open_store

    db = open_store(store, create=False)
    try:
        runs = db.list_runs(1)
    finally:
        db.close()
    return runs[0].id if runs else None


def _resolve_run(store: Path, ref: str) -> str:
    from evalsi.runs import open_store

    db = open_store(store, create=False)
    try:
        return db.get_run(ref).id
    finally:
        db.close()


def note(message: str) -> None:
    print(f"evalsi: {message}", file=sys.stderr, flush=True)


def warning(message: str) -> None:
    # a workflow command: GitHub shows it on the run's summary page
    print(f"::warning title=evalsi::{_escape(message)}", flush=True)


def error(message: str) -> None:
    print(f"::error title=evalsi::{_escape(message)}", flush=True)


def _escape(message: str) -> str:
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def write_outputs(env: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Append ``name=value`` lines to ``$GITHUB_OUTPUT`` (printed when it is not set)."""
    lines = "".join(f"{k}={' '.join(v.split())}\n" for k, v in outputs.items())
    path = env.get("GITHUB_OUTPUT")
    if not path:
        sys.stdout.write(lines)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``python -m evalsi.ci STEP``: 0 when the step did its work, 2 for bad input, 3 when
    GitHub or the store failed. The eval's own exit code is an output, never this one."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in STEPS:
        print(f"usage: python -m evalsi.ci {{{','.join(STEPS)}}}", file=sys.stderr)
        return 2
    context = Context(os.environ if env is None else env)
    try:
        outputs = STEPS[args[0]](context)
    except EvalsiError as e:
        error(str(e))
        return e.exit_code
    write_outputs(context.env, outputs)
    return 0
