"""Every shell command of every guide (and of the two READMEs) runs here, as written.

Each document is played in order in a fresh working directory that holds a copy of
`examples/`, the stub servers of `tests/support/` and the few files a guide assumes the reader
has (`qa.jsonl`, `run.yaml`, ...), made from the examples. What is changed before a command runs,
and only that: the server port 8080 becomes a free one, a run or trace id the guide shows
becomes a real one, and the example judges point at a loopback stub judge instead of a model
server on port 8000. A synopsis line (`[--flag]`, `URL`, `CMD...`) is checked against the
command's `--help` instead: every flag it shows must exist. A `pip install 'evalsi[x]'` is
checked against the extras the project declares. What cannot run here is in `NOT_RUN`, with
the reason and the test that covers it instead; an entry whose command left its document fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.guides import DocCommand, doc_commands
from tests.support.stub_llm import StubLLM

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCS = [
    "README.md",
    "examples/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "guides").rglob("*.md")),
]

P = "docs/guides/packs/"
TEXT = P + "text.md"
PROV = "docs/guides/providers.md"
_PROVIDER_RUN = (
    "calls the provider (a key, an account or a local model server); "
    "tests/e2e/test_e2e_providers.py runs the same example against the stub of its wire format"
)

# (document, start of the command) -> why it does not run here, and what covers it.
NOT_RUN: dict[tuple[str, str], str] = {
    ("docs/guides/mcp.md", "pip install 'evalsi[server,mcp]'"): "the test environment has both",
    ("docs/guides/deploy.md", "nats-server -js"): (
        "a cluster needs its own NATS and PostgreSQL database; "
        "tests/integration/test_int_cluster_server.py runs this setup (server, two workers)"
    ),
    ("docs/guides/deploy.md", "evalsi serve --config examples/cluster/evalsi.yaml"): (
        "as above: tests/integration/test_int_cluster_server.py"
    ),
    ("docs/guides/deploy.md", "evalsi worker --config examples/cluster/evalsi.yaml"): (
        "as above: tests/integration/test_int_cluster_server.py and test_int_cluster_failures.py"
    ),
    ("docs/guides/deploy.md", "evalsi cluster status --config examples/cluster/evalsi.yaml"): (
        "as above: tests/integration/test_int_cluster_server.py runs it against live workers"
    ),
    ("docs/guides/sinks.md", "pip install 'evalsi[mlflow,s3,wandb]'"): "the dev extras have them",
    ("docs/guides/sinks.md", "evalsi export latest --to mlflow:http://127.0.0.1:5000"): (
        "needs an MLflow server (20 s to start); tests/integration/test_int_sinks.py starts one"
    ),
    ("docs/guides/mcp.md", "npx @modelcontextprotocol/inspector@0.15.0"): (
        "npx would download it; tests/e2e/test_e2e_mcp_inspector.py runs the pinned Inspector"
    ),
    ("docs/guides/plugins.md", "evalsi plugin install ./acme-plugin"): (
        "builds a venv with pip (two minutes); tests/e2e/test_e2e_plugin_venv.py installs the "
        "same acme plugin (tests/fixtures/plugins) and runs list, catalog, eval and remove"
    ),
    ("docs/guides/plugins.md", "evalsi plugin remove acme"): (
        "needs the installed plugin; tests/e2e/test_e2e_plugin_venv.py removes it"
    ),
    ("docs/guides/plugins.md", "evalsi plugin install unix:/run/acme.sock"): (
        "needs a plugin serving there; tests/integration/test_int_plugins.py installs one by "
        "its address"
    ),
    ("docs/guides/plugins.md", "evalsi catalog show acme/shouty"): (
        "needs the installed plugin; tests/e2e/test_e2e_plugin_venv.py shows it"
    ),
    ("docs/guides/plugins.md", "evalsi eval --data qa.jsonl --evaluators acme/shouty"): (
        "needs the installed plugin; tests/e2e/test_e2e_plugin_venv.py runs this command"
    ),
    ("docs/guides/adapters.md", "evalsi plugin install examples/plugins/inspect-scorers"): (
        "builds a venv with inspect-ai and its dependencies (minutes); "
        "tests/integration/test_int_plugin_adapters.py serves the same package through the "
        "plugin runtime and tests/e2e/test_e2e_plugin_venv.py runs an install"
    ),
    ("docs/guides/adapters.md", "evalsi eval --data examples/qa.jsonl --evaluators inspect/"): (
        "needs the installed plugin; tests/integration/test_int_plugin_adapters.py grades with "
        "its evaluators"
    ),
    ("docs/guides/adapters.md", "evalsi plugin install examples/plugins/deepeval-metrics"): (
        "builds a venv with deepeval (minutes); tests/e2e/test_e2e_plugin_deepeval.py installs it"
    ),
    ("docs/guides/adapters.md", "evalsi eval --data examples/qa.jsonl --evaluators deepeval/"): (
        "needs the installed plugin and a judge; tests/e2e/test_e2e_plugin_deepeval.py runs it "
        "with the stub LLM as judge"
    ),
    ("docs/guides/adapters.md", "evalsi plugin install examples/plugins/ragas-metrics"): (
        "builds a venv with ragas and langchain (minutes); tests/e2e/test_e2e_plugin_ragas.py "
        "installs it"
    ),
    ("docs/guides/adapters.md", "evalsi eval --data examples/qa.jsonl --evaluators ragas/"): (
        "needs the installed plugin and a judge; tests/e2e/test_e2e_plugin_ragas.py runs it "
        "with the stub LLM as judge"
    ),
    ("docs/guides/adapters.md", "evalsi plugin install examples/plugins/lm-eval-tasks"): (
        "builds a venv with lm_eval (minutes); tests/e2e/test_e2e_plugin_lm_eval.py installs it"
    ),
    ("docs/guides/adapters.md", ".evalsi/plugins/lm-eval-tasks/bin/evalsi-lm-eval export"): (
        "needs the installed plugin; tests/e2e/test_e2e_plugin_lm_eval.py runs this export"
    ),
    ("docs/guides/adapters.md", "evalsi run -f capitals-run.yaml"): (
        "needs the installed plugin and a model; tests/e2e/test_e2e_plugin_lm_eval.py runs the "
        "exported spec against the stub LLM"
    ),
    ("README.md", "make demo"): "creates a virtual environment; bench/startup.py times it",
    ("README.md", "make test"): "the whole test suite: .ci/run runs it",
    ("docs/guides/agents.md", "scripts/small_model.sh"): (
        "builds llama.cpp (15 min cold); `make test-slow` (tests/slow) runs it in CI"
    ),
    ("docs/guides/agents.md", ".venv/bin/python -m llama_cpp.server"): (
        "needs the small-model build; tests/slow/conftest.py starts the same server"
    ),
    ("docs/guides/evaluators.md", "pip install ./acme-evals"): (
        "a package the reader writes; tests/e2e/test_e2e_plugins.py installs one"
    ),
    ("docs/guides/evaluators.md", "evalsi eval --data qa.jsonl --evaluators exact-match,keyword"): (
        "needs the reader's acme-evals package; tests/e2e/test_e2e_plugins.py runs its evaluators"
    ),
    ("docs/guides/score.md", "HF_HUB_CACHE=/data/hf-cache"): (
        "needs the reader's Hugging Face cache; tests/e2e/test_e2e_hf.py builds one offline"
    ),
    (TEXT, "evalsi eval --data examples/text/translations.jsonl --evaluators embedding"): (
        "needs a local sentence-transformers model directory; tests/unit/packs/test_text_models.py"
    ),
    (TEXT, "evalsi eval --data examples/text/translations.jsonl --evaluators bertscore"): (
        "needs a local BERT model directory; tests/unit/packs/test_text_models.py"
    ),
    # Judge commands: each judge metric asks for its own verdict format, so the tests that run
    # them script the stub judge's answers per metric and check the scores.
    ("README.md", "evalsi calibrate --judge"): "tests/e2e/test_e2e_calibrate.py runs it",
    ("docs/guides/calibration.md", "evalsi calibrate --judge"): (
        "tests/e2e/test_e2e_calibrate.py runs it"
    ),
    (P + "agent.md", "evalsi eval --data examples/agent/trips.jsonl --evaluators session"): (
        "tests/e2e/test_e2e_agent.py runs every command of the agent guide"
    ),
    (P + "rag.md", "evalsi eval --data examples/rag/rag.jsonl --evaluators faithfulness"): (
        "tests/e2e/test_e2e_rag.py runs the judged metrics through this judges.yaml"
    ),
    (P + "safety.md", "evalsi eval --data examples/safety/safety.jsonl --evaluators refusal"): (
        "tests/e2e/test_e2e_safety.py runs it"
    ),
    (TEXT, "python bench/text_throughput.py --pairs 20000 --check"): (
        "a benchmark (minutes on a loaded machine); tests/unit/packs/test_text_corpus.py checks "
        "the same numbers against sacrebleu"
    ),
    (TEXT, "python bench/text_throughput.py # 100,000"): (
        "a benchmark of minutes; its --check variant below runs"
    ),
    # The provider guide's runs call the providers themselves (its dry runs run here).
    (PROV, "evalsi run -f examples/providers/azure-openai.yaml"): _PROVIDER_RUN,
    (PROV, "evalsi run -f examples/providers/gemini.yaml"): _PROVIDER_RUN,
    (PROV, "evalsi run -f examples/providers/bedrock.yaml"): _PROVIDER_RUN,
    (PROV, "evalsi run -f examples/providers/ollama.yaml"): _PROVIDER_RUN,
}  # fmt: skip

# Commands that end with another exit code than 0, and why.
EXIT: dict[tuple[str, str], int] = {
    # The candidate drops the unit of every other answer: a significant regression, exit 1.
    ("docs/guides/mcp.md", "PYTHONPATH=examples/mcp python examples/mcp/check_change.py"): 1,
    ("README.md", "PYTHONPATH=examples/mcp python examples/mcp/check_change.py"): 1,
    ("examples/README.md", "PYTHONPATH=examples/mcp python examples/mcp/check_change.py"): 1,
    # The known-bad helpdesk trajectories miss the pack's three hard thresholds.
    ("docs/guides/evidence.md", "evalsi gate --bundle evidence/bad"): 1,
    # qa.jsonl's exact-match interval is far below 0.8: the gate fails, as the guide says.
    ("docs/guides/score.md", "evalsi eval --data qa.jsonl --evaluators exact-match,cost"): 1,
    # The example data drifts: the guide's gate fails, as it shows.
    (
        P + "ml-monitoring.md",
        "evalsi eval --data examples/ml-monitoring/current.jsonl "
        "--evaluators psi --param psi.baseline=examples/ml-monitoring/reference.jsonl "
        "--param psi.categorical=sex --gate",
    ): 1,
}

_PLACEHOLDER = re.compile(r"\[--|\.\.\.|…|\bCMD\b|\bURL\b|\bRUN_ID\b.*\[")
_PORT = re.compile(r"(?<=:)8080\b")  # the server's port in a URL (not 18080)
_SHOWN_ID = re.compile(r"\b20\d{6}-\d{4,6}(?:-[0-9a-f]+)?\b")


def _flat(text: str) -> str:
    """A command on one line: continuations joined, runs of spaces as one."""
    return " ".join(text.replace("\\\n", " ").split())


def _uncommented(text: str) -> str:
    """A one-line command without its trailing shell comment (``cmd &   # a stub``)."""
    return re.sub(r"\s+#[^'\"]*$", "", text.rstrip()).rstrip()


def _key(doc: str, text: str) -> tuple[str, str] | None:
    for key in (*NOT_RUN, *EXIT):
        if key[0] == doc and _flat(text).startswith(key[1]):
            return key
    return None


@dataclass
class Session:
    """One document being played: its directory, its servers and what earlier commands left."""

    doc: str
    cwd: Path
    judge: StubLLM
    port: int = 0
    background: list[subprocess.Popen[str]] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSI_", "HF_"))}
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env["HF_HUB_CACHE"] = str(self.cwd / "no-hf-cache")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # run.yaml stands for the reader's own spec: its Python target is in the working directory.
        env["PYTHONPATH"] = str(self.cwd)
        return env

    def prepare(self, text: str) -> str:
        """The command with the port and the ids a guide shows replaced by real ones."""
        if _PORT.search(text):
            text = _PORT.sub(str(self.server()), text)
        if _SHOWN_ID.search(text):
            text = _SHOWN_ID.sub(self.latest_run(), text)
        if "RUN_ID" in text:
            text = text.replace("RUN_ID", self.latest_run())
        if "TRACE_ID" in text:
            text = text.replace("TRACE_ID", self.a_trace())
        return text

    def server(self) -> int:
        assert self.port, f"{self.doc}: a command talks to the server before `evalsi serve`"
        return self.port

    def shell(self, text: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", text], cwd=self.cwd, env=self.env(), capture_output=True, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip

    def start(self, text: str) -> subprocess.Popen[str]:
        # Its output goes to a file: a pipe nobody reads fills up and stalls the server (a stub
        # logging every request then stops answering).
        path = self.cwd / f"background-{len(self.background)}.log"
        log = path.open("w")
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {text.rstrip().removesuffix('&')}"], cwd=self.cwd,
            env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        log.close()
        self.logs[proc.pid] = path
        self.background.append(proc)
        return proc

    def serving(self) -> bool:
        """Whether an ``evalsi serve`` of this document still runs."""
        return any(
            p.poll() is None and str(p.args[-1]).startswith("exec evalsi serve")
            for p in self.background
        )

    def latest_run(self) -> str:
        proc = self.shell("evalsi runs list --format json")
        runs = json.loads(proc.stdout)["runs"] if proc.returncode == 0 else []
        assert runs, f"{self.doc}: a command names a run before any run was stored"
        return str(runs[0]["run_id"])

    def a_trace(self) -> str:
        url = f"http://127.0.0.1:{self.server()}"
        for _ in range(100):
            proc = self.shell(f"evalsi traces list --server {url} --format json")
            traces = json.loads(proc.stdout).get("traces", []) if proc.returncode == 0 else []
            if traces:
                return str(traces[0]["trace_id"])
            time.sleep(0.1)
        raise AssertionError(f"{self.doc}: no trace stored for a command that names one")

    def close(self) -> None:
        for proc in self.background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _workdir(tmp: Path, judge: StubLLM, port: int) -> Path:
    """A copy of what the guides read, with the files they assume the reader has."""
    shutil.copytree(ROOT / "examples", tmp / "examples")
    shutil.copytree(ROOT / "tests" / "support", tmp / "tests" / "support")
    shutil.copytree(ROOT / "bench", tmp / "bench", ignore=shutil.ignore_patterns("peers"))
    if (ROOT / ".tools").exists():  # the MCP servers the seed domain pack mounts (.ci/run)
        (tmp / ".tools").symlink_to(ROOT / ".tools")
    for judges in (tmp / "examples").rglob("judges.yaml"):
        judges.write_text(judges.read_text().replace("http://127.0.0.1:8000/v1", judge.openai_url))
    for config in (tmp / "examples").rglob("evalsi.yaml"):  # the server a guide starts
        config.write_text(re.sub(r"port: 8080", f"port: {port}", config.read_text()))
    (tmp / "evalsi.yaml").write_text(f"server: {{port: {port}}}\nallowPythonTargets: true\n")
    shutil.copy(ROOT / "examples" / "qa.jsonl", tmp / "qa.jsonl")
    shutil.copy(
        ROOT / "examples" / "ml-classic" / "classification.jsonl", tmp / "predictions.jsonl"
    )
    shutil.copy(ROOT / "examples" / "calibration" / "correctness.jsonl", tmp / "labels.jsonl")
    shutil.copy(tmp / "examples" / "calibration" / "judges.yaml", tmp / "judges.yaml")
    rows = [json.loads(line) for line in (tmp / "qa.jsonl").read_text().splitlines()]
    lines = ["qid,question,answer,gold"]
    for row in rows:
        cells = [row["id"], row["input"], row["output"], row["reference"]]
        lines.append(",".join('"' + str(c).replace('"', '""') + '"' for c in cells))
    (tmp / "answers.csv").write_text("\n".join(lines) + "\n")
    spec = (ROOT / "examples" / "run-python.yaml").read_text()
    (tmp / "run.yaml").write_text(spec.replace("examples/qa.jsonl", "qa.jsonl"))
    shutil.copy(ROOT / "examples" / "echo_target.py", tmp / "echo_target.py")
    return tmp


def _wait_healthy(session: Session, proc: subprocess.Popen[str]) -> None:
    url = f"http://127.0.0.1:{session.port}/healthz"
    for _ in range(300):
        if proc.poll() is not None:
            proc.wait()
            err = session.logs[proc.pid].read_text()
            raise AssertionError(f"{session.doc}: evalsi serve exited: {err[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{session.doc}: evalsi serve never answered {url}")


def _extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


def _check_synopsis(session: Session, command: DocCommand) -> None:
    """A synopsis line: the subcommand exists and knows every flag the line shows."""
    words = command.words
    assert words[0] == "evalsi", f"{command.doc}:{command.line}: a synopsis of what? {words[0]}"
    sub = []
    for word in words[1:]:
        if word.startswith(("-", "[")) or not word.islower():
            break
        sub.append(word)
    proc = session.shell(f"evalsi {' '.join(sub)} --help")
    assert proc.returncode == 0, f"{command.doc}:{command.line}: {proc.stderr}"
    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", command.text):
        assert flag in proc.stdout, (
            f"{command.doc}:{command.line}: `evalsi {' '.join(sub)}` has no {flag}"
        )


def _run(session: Session, command: DocCommand) -> None:
    where = f"{command.doc}:{command.line}: {command.text}"
    words = command.words
    if words[:2] == ["pip", "install"]:
        for extra in re.findall(r"evalsi\[([a-z0-9,-]+)\]", command.text):
            assert set(extra.split(",")) <= _extras(), f"{where}: no such extra"
        return
    if _PLACEHOLDER.search(command.text) and words[0] == "evalsi":
        _check_synopsis(session, command)
        return
    text = session.prepare(command.text)
    if words[:2] == ["evalsi", "serve"]:
        if any(
            p.poll() is None and p.args[-1].startswith("exec evalsi serve")
            for p in session.background
        ):
            return  # a later snippet of the same document shows the server that already runs
        _wait_healthy(session, session.start(text))
        return
    if _uncommented(command.text).endswith("&"):
        session.start(_uncommented(text))
        time.sleep(1.5)  # the stub prints its URL once it listens
        return
    if words[:2] == ["evalsi", "watch"] and "--once" not in words:
        proc = session.start(text)  # follow mode prints stats until stopped
        time.sleep(6)
        output = session.logs[proc.pid].read_text()[-2000:]
        assert proc.poll() is None, f"{where}: follow mode stopped: {output}"
        return
    proc = session.shell(text)
    key = _key(command.doc, command.text)
    expected = EXIT.get(key, 0) if key else 0
    assert proc.returncode == expected, (
        f"{where}\nexit {proc.returncode} (expected {expected})\n{proc.stdout[-1500:]}\n"
        f"{proc.stderr[-3000:]}"
    )
    assert "Traceback" not in proc.stderr, f"{where}\n{proc.stderr[-3000:]}"


@pytest.fixture
def judge() -> Iterator[StubLLM]:
    """The example judges' model server: answers every judge question with a top verdict."""
    verdict = '{"score": 1, "verdict": "yes", "reason": "stub judge"}'
    with StubLLM(default=verdict) as stub:
        yield stub


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_every_command_of_the_document_runs(doc: str, tmp_path: Path, judge: StubLLM) -> None:
    commands = doc_commands(ROOT / doc, ROOT)
    port = _free_port()
    session = Session(doc, _workdir(tmp_path, judge, port), judge, port=0)
    session.port = 0
    try:
        for command in commands:
            key = _key(doc, command.text)
            if key in NOT_RUN:
                continue
            if command.words[:2] == ["evalsi", "serve"]:
                session.port = port
            _run(session, command)
    finally:
        session.close()


def test_every_not_run_entry_is_still_in_its_document() -> None:
    texts = {doc: [c.text for c in doc_commands(ROOT / doc, ROOT)] for doc in DOCS}
    for doc, start in (*NOT_RUN, *EXIT):
        assert any(_flat(t).startswith(start) for t in texts[doc]), f"{doc} lacks: {start}"


def test_commands_are_read_from_every_kind_of_block(tmp_path: Path) -> None:
    doc = tmp_path / "g.md"
    doc.write_text(
        "```console\n$ evalsi eval --data a \\\n    --evaluators x\nrun 1 · output\n```\n"
        "```bash\n# a comment\nevalsi serve   # trailing\ncurl -d '{\n  \"a\": 1}'\n```\n"
        "```python\nprint('not a command')\n```\n"
    )
    got = [(c.line, c.words) for c in doc_commands(doc, tmp_path)]
    assert got == [
        (2, ["evalsi", "eval", "--data", "a", "--evaluators", "x"]),
        (8, ["evalsi", "serve"]),
        (9, ["curl", "-d", '{\n  "a": 1}']),
    ]


def test_python_blocks_define_or_import_every_name_they_use(tmp_path: Path) -> None:
    """A document's Python blocks, read in order as one program, use no undefined name (a
    block may rely on an earlier one, as a reader pasting them in turn would)."""
    fence = re.compile(r"^```python[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        blocks = [m.group(1) for m in fence.finditer(text)]
        if blocks:
            name = doc.replace("/", "__").removesuffix(".md") + ".py"
            (tmp_path / name).write_text("\n".join(blocks))
    proc = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--isolated", "--select", "F821",
         "--output-format", "concise", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout
