"""A toy shop agent instrumented with the OpenTelemetry SDK, the way real agents are: an
OpenInference AGENT span at the root, OTel GenAI `chat` and `execute_tool` spans beneath it.
It exports OTLP to evalsi serve, which assembles, stores and grades the traces.

    python examples/watch/shop_agent.py --endpoint http://127.0.0.1:8080 --requests 20

Every fifth answer leaks a customer's e-mail address (what the example policy catches), and
its user gives it a thumbs down, sent as an `evalsi.feedback` event on the root span. Every
other chat call records its messages as OTLP log-based events (`gen_ai.user.message`,
`gen_ai.choice`), as OpenTelemetry's openai-v2 instrumentation does, instead of as the
`gen_ai.input/output.messages` attributes: evalsi joins them to their span either way.
Needs the OpenTelemetry SDK and its OTLP exporters (pip install opentelemetry-sdk
opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-grpc).
"""

from __future__ import annotations

import argparse
import json
import sys

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

QUESTIONS = ["Where is my order?", "Do you ship to Norway?", "Can I return shoes?", "Price of X1?"]


def answer(i: int, question: str) -> str:
    if i % 5 == 4:  # the bug the policy should catch: a leaked address
        return f"Your order ships to jane.doe{i}@example.com tomorrow."
    return f"Thanks for asking: '{question}' is answered in our help centre, item {i}."


def exporter(endpoint: str, protocol: str) -> object:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        target = endpoint.removeprefix("http://")
        return OTLPSpanExporter(endpoint=target, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")


def log_exporter(endpoint: str, protocol: str) -> object:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=endpoint.removeprefix("http://"), insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(endpoint=endpoint.rstrip("/") + "/v1/logs")


def run(
    endpoint: str, requests: int, protocol: str = "http", service: str = "shop-agent"
) -> list[str]:
    """Serves ``requests`` questions; returns the trace ids (hex) it exported."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter(endpoint, protocol)))  # type: ignore[arg-type]
    tracer = provider.get_tracer("shop-agent", "1.0")
    loggers = LoggerProvider(resource=Resource.create({"service.name": service}))
    loggers.add_log_record_processor(BatchLogRecordProcessor(log_exporter(endpoint, protocol)))  # type: ignore[arg-type]
    logger = loggers.get_logger("shop-agent", "1.0")
    trace_ids = []
    for i in range(requests):
        question = QUESTIONS[i % len(QUESTIONS)]
        reply = answer(i, question)
        with tracer.start_as_current_span("shop-agent") as root:
            root.set_attribute("openinference.span.kind", "AGENT")
            root.set_attribute("input.value", question)
            root.set_attribute("session.id", f"session-{i // 2}")
            with tracer.start_as_current_span("chat gpt-4o-mini") as llm:
                llm.set_attribute("gen_ai.operation.name", "chat")
                llm.set_attribute("gen_ai.request.model", "gpt-4o-mini")
                llm.set_attribute("gen_ai.usage.input_tokens", 40 + i)
                llm.set_attribute("gen_ai.usage.output_tokens", 12)
                if i % 2:  # log-based events of this span, exported by the logs pipeline
                    logger.emit(event_name="gen_ai.user.message", body={"content": question})
                    logger.emit(
                        event_name="gen_ai.choice",
                        body={"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": reply}},
                    )  # fmt: skip
                else:
                    llm.set_attribute(
                        "gen_ai.input.messages",
                        json.dumps(
                            [{"role": "user", "parts": [{"type": "text", "content": question}]}]
                        ),
                    )
                    llm.set_attribute(
                        "gen_ai.output.messages",
                        json.dumps(
                            [{"role": "assistant", "parts": [{"type": "text", "content": reply}]}]
                        ),
                    )
            with tracer.start_as_current_span("execute_tool lookup_order") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
                tool.set_attribute("gen_ai.tool.name", "lookup_order")
                tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order": i}))
                if i % 7 == 6:
                    tool.set_status(Status(StatusCode.ERROR, "order service timed out"))
            root.set_attribute("output.value", reply)
            if i % 5 == 4:  # the user saw someone else's address: a late signal on the trace
                root.add_event(
                    "evalsi.feedback",
                    {"feedback.name": "thumbs", "feedback.value": "down",
                     "feedback.comment": "shows another customer's e-mail"},
                )  # fmt: skip
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
    loggers.force_flush()  # the events before their spans, as a live app's usually arrive
    loggers.shutdown()
    provider.force_flush()
    provider.shutdown()
    return trace_ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:8080", help="evalsi serve URL")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    args = parser.parse_args(argv)
    ids = run(args.endpoint, args.requests, args.protocol)
    print(f"exported {len(ids)} traces to {args.endpoint}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
