"""A scripted stand-in for an agent, as a Run target: ``run-scripted.yaml`` runs it on
``trips.jsonl``. It plays a fixed plan of tool calls for each request, calls the (fake, local)
travel tools for real, and returns its answer with the trajectory that led to it, as an
``evalsi.connectors.TargetOutput``. The Run grades that trajectory, not the one in the dataset
(the dataset's steps and references are the answer key).

Two plans are wrong on purpose, so the metrics have something to find: the Paris-Rome search
uses the wrong date, and the Madrid-Oslo request searches but never books.
"""

from __future__ import annotations

import time
from typing import Any

from evalsi.connectors import TargetOutput
from evalsi.core import Content, Step, ToolCall, Trajectory, Usage

FLIGHTS = {
    ("BER", "LIS"): ["TP523", "FR1234"],
    ("CDG", "FCO"): ["AZ319"],
    ("MAD", "OSL"): ["DY1871"],
}


def get_weather(city: str) -> dict[str, Any]:
    return {"city": city, "temp_c": 14, "sky": "cloudy"}


def search_flights(**route: str) -> list[str]:
    return FLIGHTS.get((route["from"], route["to"]), [])


def book_flight(flight_id: str) -> dict[str, str]:
    return {"status": "confirmed", "flight": flight_id}


def search_hotels(city: str, check_in: str, nights: int) -> list[str]:
    return [f"{city} Central", f"{city} Garden"]


TOOLS = {f.__name__: f for f in (get_weather, search_flights, book_flight, search_hotels)}

PLANS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "What's the weather in Paris right now?": [("get_weather", {"city": "Paris"})],
    "Book me the cheapest flight from Berlin to Lisbon on 14 March 2026.": [
        ("search_flights", {"from": "BER", "to": "LIS", "date": "2026-03-14"}),
        ("book_flight", {"flight_id": "TP523"}),
    ],
    "Find flights from Paris to Rome on 2 May 2026.": [
        ("search_flights", {"from": "CDG", "to": "FCO", "date": "2026-05-20"}),  # wrong date
    ],
    "Find a hotel in Kyoto for two nights from 10 April 2026.": [
        ("search_hotels", {"city": "Kyoto", "check_in": "2026-04-10", "nights": 2}),
    ],
    "Book the earliest flight from Madrid to Oslo on 1 June 2026.": [
        ("search_flights", {"from": "MAD", "to": "OSL", "date": "2026-06-01"}),  # never books
    ],
    "Is it raining in London?": [("get_weather", {"city": "London"})],
    "Wie ist das Wetter in Zürich?": [("get_weather", {"city": "Zürich"})],
    "What's the weather in Oslo?": [("get_weather", {"city": "Oslo"})],
}


def run(request: str) -> TargetOutput:
    """Play the plan for ``request``: one model step, then each tool call with its result."""
    steps = [Step("llm_call", "scripted", usage=Usage(input_tokens=100, output_tokens=20))]
    results = []
    for i, (tool, args) in enumerate(PLANS.get(request, [])):
        started = time.time_ns()
        result = TOOLS[tool](**args)
        results.append(result)
        steps.append(
            Step(
                "tool_call",
                tool,
                output=result,
                tool_call=ToolCall(tool, args, f"call-{i}"),
                start_time_unix_nano=started,
                end_time_unix_nano=time.time_ns(),
            )
        )
    answer = f"Done: {results[-1]}" if results else "You're welcome!"
    return TargetOutput(
        output=Content.of_text(answer),
        usage=Usage(input_tokens=100, output_tokens=20),
        trajectory=Trajectory(steps, stop_reason="final_answer"),
    )
