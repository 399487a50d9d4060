"""A corpus metric in a live policy, end to end: ``examples/watch/data-quality.yaml`` applied
to a real loopback server through the Python client, traces sent by the OpenTelemetry SDK over
OTLP/HTTP, and ``GetPolicyStats`` showing ``missing-rate`` over the window's traces (the share
without a user id, as counted here by hand) while the record-scope step grades each trace."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import evalsi
from evalsi.core import MetricSummary
from evalsi.server._state import TracesConfig
from tests.support.policy_traces import agent_turn, wait_for
from tests.support.server_state import server_state, serving

ROOT = Path(__file__).resolve().parents[2]
POLICY = (ROOT / "examples" / "watch" / "data-quality.yaml").read_text()


def _window(client: evalsi.Client) -> dict[str, MetricSummary]:
    stats = client.policy_stats("support-data-quality", project_id="team-a")
    return {m.evaluator: m for m in stats.window}


@pytest.mark.parametrize("with_user", [0, 1, 3, 4])  # 100 %, 75 %, 25 %, 0 % missing
def test_a_window_corpus_metric_over_live_traces(tmp_path: Path, with_user: int) -> None:
    state = server_state(tmp_path, runs=False, traces=TracesConfig(grace_s=0.05))
    with serving(state) as server, evalsi.Client(server.url) as client:
        client.apply_policy(POLICY)
        exporter = OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces", headers={"x-evalsi-project": "team-a"}
        )
        for i in range(4):
            _, _, spans = agent_turn("thanks!", user=f"u-{i}" if i < with_user else None)
            assert exporter.export(spans).name == "SUCCESS"
        exporter.shutdown()  # type: ignore[no-untyped-call]
        wait_for(
            "the corpus metric over all four traces",
            lambda: (m := _window(client).get("missing-rate")) is not None and m.n == 4,
            timeout=20,
        )
        window = _window(client)
    missing = window["missing-rate"]
    assert missing.mean == pytest.approx((4 - with_user) / 4)  # session ids are all set
    assert missing.ci.method == "bootstrap-percentile"
    assert window["contains"].n == 4
