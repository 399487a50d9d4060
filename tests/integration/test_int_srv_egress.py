"""The egress policy on a real server: run specs and policies naming inward addresses are
refused at submission with the rule named; a name that resolves inward is refused when the
run connects (its tasks end as infra_error(egress_denied), the stub never called); a server
bound to a non-loopback address of this machine denies loopback; the embedded engine still
calls a loopback stub freely. Each refusal has its allowed control."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as ppb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceClientSync
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.connectors import EgressPolicy
from evalsi.runs import execute_run
from evalsi.store import SqlStore
from tests.integration.run_support import model_spec, write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.registry import BUILTINS
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import server_state
from tests.support.stub_llm import StubLLM


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine off loopback that a server can bind (``hostname -I``)."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    for word in out.stdout.split():
        try:
            address = ipaddress.ip_address(word)
        except ValueError:
            continue
        if address.version == 4 and not address.is_loopback:
            with socket.socket() as s:
                try:
                    s.bind((word, 0))
                except OSError:
                    continue
            return word
    return None


def _loopback_name() -> str | None:
    """This machine's host name when it resolves only to loopback (through /etc/hosts)."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    loopback = all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
    return name if infos and loopback and name != "localhost" else None


def _refusal(call: Any) -> str:
    with pytest.raises(ConnectError) as e:
        call()
    assert e.value.code == Code.INVALID_ARGUMENT
    return e.value.message


POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: hooks}}
spec:
  cascade: [{{ref: contains, params: {{values: [thanks]}}}}]
  alerts:
    - {{name: low, when: "rate('contains') < 0.5", notify: "{url}"}}
"""


@pytest.fixture(scope="module")
def on_loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A whole server on 127.0.0.1 (the default policy) and its temp dir."""
    tmp = tmp_path_factory.mktemp("egress")
    (tmp / "datasets").mkdir()
    write_qa(tmp / "datasets" / "qa.jsonl", 4)
    state = server_state(tmp)
    from evalsi.server._app import build_app

    with AsgiServer(build_app(state)) as server:
        yield server.url, tmp
    state.store.close()


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://169.254.169.254/v1", "always-deny cloud-metadata"),
        ("http://[::ffff:169.254.169.254]/v1", "always-deny cloud-metadata"),
        ("http://metadata.google.internal/v1", "always-deny cloud-metadata"),
        ("http://169.254.10.10:8000/v1", "always-deny link-local"),
    ],
)
def test_a_run_naming_metadata_or_link_local_is_refused_at_submission(
    on_loopback: tuple[str, Path], url: str, rule: str
) -> None:
    client = RunServiceClientSync(on_loopback[0])
    doc = run_doc(url, "qa.jsonl")
    message = _refusal(lambda: client.create_run(pb.CreateRunRequest(run=run_message(doc))))
    assert message.startswith("spec.target.model.baseUrl: egress denied:")
    assert f"rule: {rule}" in message
    assert "in evalsi.yaml" in message  # how to allow it
    judged = run_doc("http://127.0.0.1:9/v1", "qa.jsonl")
    judged["spec"]["judges"] = {
        "j": {"connector": "openai-compatible", "baseUrl": url, "model": "m"}
    }
    message = _refusal(lambda: client.create_run(pb.CreateRunRequest(run=run_message(judged))))
    assert message.startswith("spec.judges.j.baseUrl: egress denied:")
    client.close()


def test_a_loopback_server_runs_against_a_loopback_model(on_loopback: tuple[str, Path]) -> None:
    client = RunServiceClientSync(on_loopback[0])
    with StubLLM(answers={f"q{i}": f"a{i}" for i in range(4)}) as stub:
        doc = run_doc(stub.openai_url, "qa.jsonl")
        run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
        final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
        assert stub.calls("/v1/chat/completions") == 4
    assert final.status == "done"
    client.close()


def test_a_policy_webhook_to_metadata_is_refused_at_submission(
    on_loopback: tuple[str, Path],
) -> None:
    client = PolicyServiceClientSync(on_loopback[0])
    text = POLICY.format(url="http://169.254.169.254/hook")
    message = _refusal(lambda: client.apply_policy(ppb.ApplyPolicyRequest(yaml=text)))
    assert message.startswith("spec.alerts[0].notify: egress denied: 169.254.169.254 port 80")
    assert "rule: always-deny cloud-metadata" in message
    ok = client.apply_policy(ppb.ApplyPolicyRequest(yaml=POLICY.format(url="http://127.0.0.1:9/h")))
    assert ok.policy.name == "hooks"  # the control: a loopback webhook on a loopback server
    client.close()


def test_a_sink_to_metadata_is_refused_at_submission(on_loopback: tuple[str, Path]) -> None:
    client = PolicyServiceClientSync(on_loopback[0])
    text = POLICY.format(url="http://127.0.0.1:9/h") + (
        "  sinks:\n    - mlflow: {trackingUri: 'http://169.254.169.254/mlflow'}\n"
    )
    message = _refusal(lambda: client.apply_policy(ppb.ApplyPolicyRequest(yaml=text)))
    assert message.startswith("spec.sinks[0].mlflow.trackingUri: egress denied: 169.254.169.254")
    runs = RunServiceClientSync(on_loopback[0])
    doc = run_doc("http://127.0.0.1:9/v1", "qa.jsonl")
    doc["spec"]["sinks"] = [{"webhook": {"url": "http://[::ffff:169.254.169.254]/h"}}]
    message = _refusal(lambda: runs.create_run(pb.CreateRunRequest(run=run_message(doc))))
    assert message.startswith("spec.sinks[0].webhook.url: egress denied:")
    client.close()
    runs.close()


# -- a server listening off loopback ---------------------------------------------------------------
@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, StubLLM]]:
    """A server bound to a non-loopback address of this machine; one loopback port allowed."""
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to bind")
    tmp = tmp_path_factory.mktemp("egress-exposed")
    (tmp / "datasets").mkdir()
    write_qa(tmp / "datasets" / "qa.jsonl", 4)
    with StubLLM(answers={f"q{i}": f"a{i}" for i in range(4)}) as allowed:
        policy = EgressPolicy.from_lists(allow=[f"127.0.0.1:{allowed.port}"])
        state = server_state(tmp, host=address, no_auth=True, egress=policy)
        from evalsi.server._app import build_app

        with AsgiServer(build_app(state), host=address) as server:
            yield server.url, tmp, allowed
        state.store.close()


def test_an_exposed_server_refuses_a_loopback_target(exposed: tuple[str, Path, StubLLM]) -> None:
    url, _, _ = exposed
    client = RunServiceClientSync(url)
    doc = run_doc("http://127.0.0.1:5432/v1", "qa.jsonl")
    message = _refusal(lambda: client.create_run(pb.CreateRunRequest(run=run_message(doc))))
    assert "egress denied: 127.0.0.1 port 5432 is a loopback address" in message
    assert "rule: loopback and private denied off loopback" in message
    assert f"the server listens on {url.split('//')[1].rsplit(':', 1)[0]}" in message
    client.close()


def test_an_exposed_server_judges_a_name_by_where_it_resolves(
    exposed: tuple[str, Path, StubLLM],
) -> None:
    url, tmp, _ = exposed
    name = _loopback_name()
    if name is None:
        pytest.skip("this machine's host name does not resolve to loopback")
    client = RunServiceClientSync(url)
    with StubLLM() as inward:  # live on loopback, not in egress.allow
        # The name passes the static check (it is not known inward until resolved) ...
        doc = run_doc(f"http://{name}:{inward.port}/v1", "qa.jsonl")
        run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
        final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
        assert inward.calls() == 0
    client.close()
    # ... and every task is refused at connect time: tried once, never scored.
    store = SqlStore.open(str(tmp / "s.db"))
    outputs = list(store.iter_outputs(run_id))
    store.close()
    assert final.status == "incomplete"  # every task lost to infrastructure
    assert len(outputs) == 4
    assert {(o.status, o.kind, o.attempts) for o in outputs} == {
        ("infra_error", "egress_denied", 1)
    }
    assert all(f"{name.lower()} (127.0.0.1) port {inward.port}" in (o.error or "") for o in outputs)


def test_an_exposed_server_calls_what_egress_allow_names(
    exposed: tuple[str, Path, StubLLM],
) -> None:
    url, _, allowed = exposed
    client = RunServiceClientSync(url)
    before = allowed.calls("/v1/chat/completions")
    doc = run_doc(allowed.openai_url, "qa.jsonl")
    run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
    final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
    client.close()
    assert final.status == "done"
    assert allowed.calls("/v1/chat/completions") - before == 4


# -- the embedded engine ---------------------------------------------------------------------------
def test_the_embedded_engine_keeps_its_freedom(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 3)
    name = _loopback_name() or "localhost"
    with StubLLM(answers={f"q{i}": f"a{i}" for i in range(3)}) as stub:
        spec = model_spec(f"http://{name}:{stub.port}/v1", data)
        result = asyncio.run(execute_run(spec, store=str(tmp_path / "e.db"), registry=BUILTINS))
        assert stub.calls("/v1/chat/completions") == 3
    assert result.status == "done"
    assert result.infra_errors == 0
