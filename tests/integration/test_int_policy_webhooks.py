"""Alerts delivered to a real webhook receiver on loopback, and promoted traces becoming a
dataset version that `evalsi eval` grades."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from evalsi.core import Content, Record, Span, SpanView, Trace
from evalsi.datasets import open_dataset
from evalsi.policies import PolicyEngine, policy_from_yaml
from evalsi.policies._alerts import WebhookNotifier
from evalsi.server._dataset_files import DatasetFiles
from evalsi.server._policies import DatasetPromoter
from tests.support.registry import BUILTINS

EVALSI = Path(sys.executable).with_name("evalsi")


def make(i: int, output: str) -> tuple[Trace, Record]:
    tid = f"{i:032x}"
    root = Span(trace_id=tid, span_id="1" * 16, end_time_unix_nano=1, view=SpanView("agent"))
    record = Record(
        id=tid,
        input=Content.of_text(f"question {i}"),
        output=Content.of_text(output),
        reference=Content.of_text("thanks"),
        metadata={"content_captured": True, "agent": "support"},
    )
    return Trace(tid, spans=[root]), record


class Receiver:
    """An aiohttp app on loopback that records every POST; the first ``fail`` get a 503."""

    def __init__(self, fail: int = 0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.attempts = 0
        self.fail = fail
        self.got = asyncio.Event()

    async def hook(self, request: web.Request) -> web.Response:
        self.attempts += 1
        if self.attempts <= self.fail:
            return web.Response(status=503)
        self.posts.append(await request.json())
        self.got.set()
        return web.Response(status=204)


@asynccontextmanager
async def receiving(receiver: Receiver) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/hook", receiver.hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        await runner.cleanup()


def policy(url: str, extra: str = "") -> str:
    return f"""\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: hooks}}
spec:
  cascade: [{{ref: contains, params: {{values: [thanks]}}}}]
  alerts:
    - name: low-thanks
      when: "rate('contains') < 0.5 && count('contains') >= 4"
      notify: "{url}"
{extra}"""


def test_an_alert_is_posted_once_and_a_retry_survives_a_503() -> None:
    async def main() -> tuple[Receiver, dict[str, Any]]:
        receiver = Receiver(fail=1)
        async with receiving(receiver) as url:
            engine = PolicyEngine(
                notifier=WebhookNotifier(timeout_s=5, retries=2), registry=BUILTINS
            )
            await engine.apply(policy_from_yaml(policy(url), registry=BUILTINS))
            for i, text in enumerate(["thanks", "no", "nope", "never", "no", "thanks"]):
                await engine.on_trace(*make(i, text))
            await engine.drain()
            stats = engine.stats("hooks").to_dict()
            await engine.close()
        return receiver, stats

    receiver, stats = asyncio.run(main())
    assert receiver.attempts == 2  # the 503, then the retry
    [post] = receiver.posts
    assert (post["policy"], post["alert"], post["kind"]) == ("hooks", "low-thanks", "evalsi.alert")
    [metric] = post["metrics"]
    assert (metric["evaluator"], metric["n"]) == ("contains", 4)
    assert metric["mean"] == 0.25  # fired when the 4th trace made the condition true
    assert stats["alerts_fired"] == 1
    assert stats["alert_failures"] == 0
    assert stats["firing"] == ["low-thanks"]


def test_a_dead_webhook_is_counted_and_grading_goes_on() -> None:
    async def main() -> dict[str, Any]:
        receiver = Receiver(fail=100)
        async with receiving(receiver) as url:
            engine = PolicyEngine(
                notifier=WebhookNotifier(timeout_s=2, retries=1), registry=BUILTINS
            )
            await engine.apply(policy_from_yaml(policy(url), registry=BUILTINS))
            for i in range(6):
                await engine.on_trace(*make(i, "no"))
            await engine.drain()
            await engine.close()
            return engine.stats("hooks").to_dict()

    stats = asyncio.run(main())
    assert (stats["evaluated"], stats["alerts_fired"], stats["alert_failures"]) == (6, 1, 1)


def test_promoted_traces_form_a_dataset_evalsi_eval_grades(tmp_path: Path) -> None:
    files = DatasetFiles(tmp_path / "datasets")
    extra = "  promote: {when: \"passed('contains') == false\", dataset: regressions}\n"

    async def main() -> dict[str, Any]:
        engine = PolicyEngine(promoter=DatasetPromoter(lambda _project: files), registry=BUILTINS)
        await engine.apply(
            policy_from_yaml(policy("http://127.0.0.1:9/unused", extra), registry=BUILTINS)
        )
        for i, text in enumerate(["thanks", "no way", "thanks!", "bye", "no way"]):
            await engine.on_trace(*make(i, text))
        await engine.on_trace(*make(1, "no way"))  # the same trace again: not appended twice
        await engine.close()
        return engine.stats("hooks").to_dict()

    stats = asyncio.run(main())
    assert stats["promoted"] == 3
    latest = files.get("regressions")
    assert latest.rows == 3
    path = tmp_path / "datasets" / latest.path
    records = list(open_dataset(str(path)))
    assert [r.id for r in records] == [f"{i:032x}" for i in (1, 3, 4)]
    assert records[0].input is not None
    assert records[0].input.as_text() == "question 1"
    assert records[0].metadata["promoted_by"] == "hooks"
    done = subprocess.run(
        [str(EVALSI), "eval", "--data", str(path), "--evaluators", "exact-match",
         "--format", "json", "--store", str(tmp_path / "e.db")],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["records"] == 3
    [metric] = result["metrics"]
    assert (metric["n"], metric["mean"]) == (3, 0.0)  # every promoted output missed "thanks"
