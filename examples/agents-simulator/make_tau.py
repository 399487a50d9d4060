"""Write the tau-mini EvalRuns (run this from the repository root after changing the domain):
the known-good agent, the agent that does nothing, and a model agent with a model user."""

from pathlib import Path

from tau_mini_tools import TOOLS, WRITES

from evalsi.benchmarks import tau_run_spec

HERE = Path(__file__).parent
DOMAIN = HERE / "tau-mini"
STUB = "http://127.0.0.1:18084/v1"

for name, agent, user in (
    (
        "gold",
        {"connector": "scripted", "model": "gold"},
        {"connector": "scripted", "model": "turns"},
    ),
    (
        "empty",
        {"connector": "scripted", "model": "empty"},
        {"connector": "scripted", "model": "turns"},
    ),
    (
        "model",
        {"connector": "openai-compatible", "baseUrl": STUB, "model": "agent-model"},
        {"connector": "openai-compatible", "baseUrl": STUB, "model": "user-model"},
    ),
):
    spec = tau_run_spec(
        DOMAIN,
        "tau_mini_tools",
        DOMAIN,
        agent=agent,
        user=user,
        tool_names=TOOLS,
        writes=WRITES,
        name=f"tau-mini-{name}",
    )
    spec.rename(DOMAIN / f"run-{name}.yaml")
