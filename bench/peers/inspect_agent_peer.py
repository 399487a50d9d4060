"""Inspect AI peer for the agent-harness benchmark: react() calling step(n) N times, then done.

Run with the peers' venv (see bench/peers/setup.sh); ``bench/agent_harness.py --peers`` runs
it between its own rounds:

    bench/.peers/venv/bin/python bench/peers/inspect_agent_peer.py --model mock --trials 500
    bench/.peers/venv/bin/python bench/peers/inspect_agent_peer.py --model stub --url URL

The task is ``bench/agent_harness.py``'s: ``--trials`` samples of input "go", target "done";
the agent is ``react()`` with one tool, ``step(n: int) -> str`` returning ``f"s{n + 1}"``; the
model asks for ``step(0)`` on "go", for ``step(k)`` on the tool result "sk" while k <
``--tool-calls``, and on the last result ends the trial — with react()'s default
``submit(answer="done")`` tool call, or, with ``--no-submit``, ``react(submit=False)`` and the
plain answer "done" (the conversation evalsi has). Either way a trial is ``--tool-calls`` + 1
model calls; the submit call is one more tool call, which the agent handles itself.

The model (``--model``):

- ``mock``: Inspect's ``mockllm/model`` with a ``custom_outputs`` callable that keys on the
  last user or tool message's text, like the stub. No HTTP: Inspect's harness alone.
- ``stub``: the stub LLM server at ``--url`` through Inspect's OpenAI-compatible provider,
  ``openai-api/stub/stub`` (``STUB_BASE_URL`` = ``URL/v1``, a dummy ``STUB_API_KEY``). The
  stub must hold the script above (``bench/agent_harness.py``'s ``script(n, submit=...)``):
  this script only talks to it.

``max_samples`` = ``max_connections`` = ``--concurrency`` (32, the bench's), scorer
``exact()``, display none, no retries (``fail_on_error``), the log written to a throw-away
temp dir with every sample in it (Inspect's default; evalsi persists every trajectory too),
unless ``--no-log-samples``.

Timed (``seconds``): the ``inspect_ai.eval()`` call only. Not timed: interpreter start,
imports, building the task, the temp-dir cleanup. Offline: the only network traffic is to
``--url``.

Prints ONE JSON line on stdout: ``{"peer": "inspect-ai", "version", "model", "submit",
"trials", "tool_calls", "seconds", "trials_per_s", "concurrency", "mean_exact",
"log_samples"}``. Everything else goes to stderr. Exit 1 when the eval did not succeed or not
every trial scored 1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

MODELS = {"mock": "mockllm/model", "stub": "openai-api/stub/stub"}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mock")
    p.add_argument("--url", help="the stub's base URL (http://127.0.0.1:PORT); unused by mock")
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--tool-calls", type=int, default=5)
    p.add_argument("--concurrency", type=int, default=32, help="max_samples / max_connections")
    p.add_argument(
        "--no-submit",
        dest="submit",
        action="store_false",
        help="react(submit=False): the model ends with the answer instead of submit()",
    )
    p.add_argument(
        "--no-log-samples",
        dest="log_samples",
        action="store_false",
        help="leave per-sample records out of the log (Inspect's default writes them)",
    )
    args = p.parse_args(argv)
    if args.model == "stub" and not args.url:
        p.error("--model stub needs --url")
    return args


def mock_outputs(calls: int, submit: bool) -> Any:
    """The mock model's script, keyed on the last user or tool message like the stub's."""
    from inspect_ai.model import ChatMessageTool, ChatMessageUser, ModelOutput, ModelUsage

    def output(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        last = next(
            m for m in reversed(messages) if isinstance(m, ChatMessageUser | ChatMessageTool)
        )
        k = 0 if last.text == "go" else int(last.text[1:])
        if k < calls:
            out = ModelOutput.for_tool_call("mockllm/model", "step", {"n": k}, content="")
        elif submit:
            out = ModelOutput.for_tool_call(
                "mockllm/model", "submit", {"answer": "done"}, content=""
            )
        else:
            out = ModelOutput.from_content("mockllm/model", "done")
        # Usage counted in words like the stub: without it mockllm counts tokens with
        # tiktoken, whose encoding is a download (offline here) and costs more than words.
        prompt = max(1, sum(len(m.text.split()) for m in messages))
        out.usage = ModelUsage(input_tokens=prompt, output_tokens=1, total_tokens=prompt + 1)
        return out

    return output


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    os.environ.setdefault("INSPECT_DISPLAY", "none")
    os.environ.setdefault("INSPECT_LOG_LEVEL", "warning")
    if args.url:
        os.environ["STUB_BASE_URL"] = args.url.rstrip("/") + "/v1"
        os.environ.setdefault("STUB_API_KEY", "dummy")

    import inspect_ai
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.agent import react
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import exact
    from inspect_ai.tool import Tool, tool

    @tool
    def step() -> Tool:
        async def execute(n: int) -> str:
            """The next step.

            Args:
                n: The current step.
            """
            return f"s{n + 1}"

        return execute

    model = (
        get_model("mockllm/model", custom_outputs=mock_outputs(args.tool_calls, args.submit))
        if args.model == "mock"
        else MODELS["stub"]
    )
    task = Task(
        dataset=MemoryDataset(
            [Sample(id=f"t{i}", input="go", target="done") for i in range(args.trials)],
            name="agent-bench",
        ),
        solver=react(tools=[step()], submit=None if args.submit else False),
        scorer=exact(),
        name="agent_bench",
    )

    log_dir = tempfile.mkdtemp(prefix="inspect-agent-peer-logs-")
    try:
        cpu, t0 = time.process_time(), time.perf_counter()
        logs = inspect_eval(
            task,
            model=model,
            display="none",
            log_dir=log_dir,
            log_samples=args.log_samples,
            score_display=False,
            max_connections=args.concurrency,
            max_samples=args.concurrency,
            max_retries=0,
            ctl_server=False,
            fail_on_error=True,
        )
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

    log = logs[0]
    if log.status != "success" or log.results is None:
        print(
            f"inspect eval did not succeed: status={log.status} "
            f"error={log.error.message if log.error else None}",
            file=sys.stderr,
        )
        return 1
    mean_exact = log.results.scores[0].metrics["mean"].value
    print(
        json.dumps(
            {
                "peer": "inspect-ai",
                "version": inspect_ai.__version__,
                "model": MODELS[args.model],
                "submit": args.submit,
                "trials": args.trials,
                "tool_calls": args.tool_calls,
                "seconds": round(seconds, 6),
                "cpu_seconds": round(cpu, 6),
                "trials_per_s": round(args.trials / seconds, 3),
                "concurrency": args.concurrency,
                "mean_exact": mean_exact,
                "log_samples": args.log_samples,
            }
        ),
        flush=True,
    )
    if mean_exact != 1.0:
        print(f"expected every trial to answer done, mean exact() = {mean_exact}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
