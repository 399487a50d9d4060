"""`evalsi watch` as a user runs it: apply a policy to a server, print its stats, and refuse a
bad policy naming the file, line and field (exit 2)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceASGIApplication
from evalsi.core import Content, Record, Span, SpanView, Trace
from evalsi.server._policies import PolicyHandler
from tests.support.asgi_server import AsgiServer
from tests.support.server_state import server_state, serving

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "watch" / "policy.yaml"

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: shop-agent}
spec:
  selector: 'span.type == "agent"'
  cascade:
    - {ref: contains, params: {values: [sorry]}}
    - {ref: length, when: "passed('contains') == false"}
"""


class Server:
    def __init__(self, server: AsgiServer, handler: PolicyHandler) -> None:
        self.server, self.handler = server, handler

    @property
    def url(self) -> str:
        return self.server.url

    def trace(self, i: int, output: str) -> None:
        tid = f"{i:032x}"
        root = Span(trace_id=tid, span_id="2" * 16, end_time_unix_nano=1, view=SpanView("agent"))
        record = Record(id=tid, input=Content.of_text("hello"), output=Content.of_text(output))
        loop = self.server._loop
        assert loop is not None
        coro = self.handler.engine.on_trace(Trace(tid, spans=[root]), record)
        asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    state = server_state(tmp_path / "srv", runs=False)
    handler = PolicyHandler(state)
    with serving(state, [(PolicyServiceASGIApplication, handler)]) as srv:
        yield Server(srv, handler)


def test_watch_once_applies_and_prints_the_stats(
    server: Server, cli: Callable[..., Any], json_out: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    first = json_out(
        cli("watch", "-f", "policy.yaml", "--server", server.url, "--once", "--format", "json")
    )
    assert first["policy"]["name"] == "shop-agent"
    assert first["policy"]["changed"] is True
    assert first["stats"]["evaluated"] == 0
    for i, text in enumerate(["sorry, no", "here you go", "sorry", "done"]):
        server.trace(i, text)
    again = json_out(
        cli("watch", "-f", "policy.yaml", "--server", server.url, "--once", "--format", "json")
    )
    assert again["policy"]["changed"] is False
    assert again["policy"]["run_id"] == first["policy"]["run_id"]
    stats = again["stats"]
    assert (stats["selected"], stats["evaluated"]) == (4, 4)
    metrics = {m["evaluator"]: m for m in stats["window"]}
    assert (metrics["contains"]["n"], metrics["contains"]["mean"]) == (4, 0.5)
    assert metrics["contains"]["ci_method"] == "wilson"
    assert (metrics["length"]["n"], metrics["length"]["skipped"]) == (2, 2)
    table = cli("watch", "-f", "policy.yaml", "--server", server.url, "--once")
    assert table.returncode == 0, table.stderr
    assert "shop-agent: selected 4, sampled 4, evaluated 4" in table.stdout
    assert "contains" in table.stdout
    assert "already applied" in table.stderr


def test_a_bad_policy_exits_2_naming_file_line_and_field(
    server: Server, cli: Callable[..., Any], user_error: Callable[..., str], tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(POLICY.replace("ref: length", "ref: lenght"))
    proc = cli("watch", "-f", "bad.yaml", "--server", server.url, "--once")
    user_error(proc, "bad.yaml:8: spec.cascade[1].ref: unknown evaluator 'lenght'")
    (tmp_path / "typo.yaml").write_text(POLICY + "  windw: 5m\n")
    proc = cli("watch", "-f", "typo.yaml", "--server", server.url, "--once")
    user_error(proc, "typo.yaml:9: spec.windw: unknown field 'windw' (did you mean window?)")


def test_a_binary_policy_file_is_named_on_both_paths(
    server: Server, cli: Callable[..., Any], user_error: Callable[..., str], tmp_path: Path
) -> None:
    (tmp_path / "binary.yaml").write_bytes(b"\x00\xff\xfe binary")
    expected = "binary.yaml: not UTF-8 text (byte 1)"
    user_error(cli("watch", "-f", "binary.yaml", "--check"), expected)
    user_error(cli("watch", "-f", "binary.yaml", "--server", server.url, "--once"), expected)
    missing = "missing.yaml: cannot read the policy file (not found)"
    user_error(cli("watch", "-f", "missing.yaml", "--server", server.url, "--once"), missing)


@pytest.mark.parametrize("interval", ["nan", "inf", "-inf", "0", "-1"])
def test_watch_needs_a_finite_positive_interval(
    cli: Callable[..., Any], user_error: Callable[..., str], interval: str
) -> None:
    # nan passed a `<= 0` check, then asyncio.sleep(nan) hung after the first print.
    # `--interval=X`: argparse would read a bare `-inf` as an option.
    proc = cli(
        "watch", "-f", "policy.yaml", "--server", "http://127.0.0.1:9", f"--interval={interval}"
    )
    user_error(proc, "--interval: expected a finite positive number of seconds")


def test_watch_needs_a_server_unless_it_only_checks(
    cli: Callable[..., Any], user_error: Callable[..., str], json_out: Callable[..., Any],
    tmp_path: Path,
) -> None:  # fmt: skip
    shutil.copy(EXAMPLE, tmp_path / "policy.yaml")
    user_error(cli("watch", "-f", "policy.yaml", env={"EVALSI_SERVER": ""}), "--server URL")
    checked = json_out(cli("watch", "-f", "policy.yaml", "--check", "--format", "json"))
    assert (checked["name"], checked["valid"]) == ("prod-support-agent", True)
    (tmp_path / "rate.yaml").write_text(EXAMPLE.read_text().replace("rate: 0.05", "rate: 1.5"))
    user_error(
        cli("watch", "-f", "rate.yaml", "--check"),
        "rate.yaml:12: spec.sampling.rate: expected a value <= 1, got 1.5",
    )


def test_watch_prints_until_interrupted(
    server: Server, start_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    import json
    import signal

    (tmp_path / "policy.yaml").write_text(POLICY)
    proc = start_evalsi(
        "watch", "-f", "policy.yaml", "--server", server.url, "--interval", "0.2",
        "--format", "json",
    )  # fmt: skip
    first = json.loads(proc.stdout.readline())
    server.trace(1, "sorry")
    while True:  # a line per interval; the graded trace shows up in one of the next
        line = json.loads(proc.stdout.readline())
        if line["stats"]["evaluated"] == 1:
            break
    assert first["stats"]["evaluated"] == 0
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped watching; the policy stays applied" in err
