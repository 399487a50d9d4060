"""What a coding agent does over MCP to check its own change (the Phase 6 exit, as a script):
run the spec through `evalsi mcp`, change the target, run again, and ask `compare_runs`
whether the change made things worse. Exit 1 on a significant regression.

    PYTHONPATH=examples/mcp python examples/mcp/check_change.py [--candidate assistant:answer_terse]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path

import yaml
from mcp import Client, StdioServerParameters

SPEC = Path(__file__).with_name("run.yaml")


async def main(candidate: str) -> int:
    spec = yaml.safe_load(SPEC.read_text())
    # Sent as JSON, the spec has no file to be next to: its dataset path is made relative to
    # where `evalsi mcp` runs (the working directory), as `evalsi run -f` reads it.
    dataset = SPEC.parent / spec["spec"]["dataset"]["path"]
    spec["spec"]["dataset"]["path"] = os.path.relpath(dataset.resolve(), Path.cwd())
    evalsi = shutil.which("evalsi") or str(Path(sys.executable).with_name("evalsi"))
    server = StdioServerParameters(command=evalsi, args=["mcp"], env=dict(os.environ))
    async with Client(server) as client:
        before = await client.call_tool("start_run", {"run": spec})
        spec["spec"]["target"]["python"] = candidate  # the agent's change
        after = await client.call_tool("start_run", {"run": spec})
        for result in (before, after):
            if result.is_error:
                print(result.content[0].text, file=sys.stderr)
                return 2
        a, b = before.structured_content["run"], after.structured_content["run"]
        compared = await client.call_tool("compare_runs", {"baseline": a["id"], "candidate": b["id"]})
        if compared.is_error:
            print(compared.content[0].text, file=sys.stderr)
            return 2
    regressed = False
    for m in compared.structured_content["metrics"]:
        ci = m["ci"]
        print(
            f"{m['evaluator']}/{m['metric']}: {m['meanBaseline']:.2f} -> {m['meanCandidate']:.2f} "
            f"(delta {m['delta']:+.2f}, 95% CI [{ci['low']:+.2f}, {ci['high']:+.2f}]): {m['verdict']}"
        )
        regressed = regressed or m["verdict"] == "regressed"
    return 1 if regressed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidate", default="assistant:answer_terse")
    sys.exit(asyncio.run(main(parser.parse_args().candidate)))
