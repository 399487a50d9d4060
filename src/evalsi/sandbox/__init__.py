"""Run untrusted programs on the strongest isolation rung available, or not at all.

The ladder, strongest first: ``vm`` (firecracker) > ``kernel`` > ``namespaced`` (bwrap) >
``confined`` (landlock) > ``none``. A spec's ``min_isolation`` is the weakest level it accepts;
when no working rung reaches it, ``Sandbox.create`` raises ``SandboxUnavailable``
(SANDBOX_UNAVAILABLE) and nothing runs. Every execution reports how it was confined
(``ExecResult.isolation``: driver, level, enforcement full | partial).

Example (runs anywhere, because it accepts the ``none`` rung explicitly)::

    from evalsi.sandbox import Level, Sandbox, SandboxSpec

    spec = SandboxSpec(min_isolation=Level.NONE, timeout_seconds=5)
    with Sandbox.create(spec) as sb:
        sb.copy_in(b"print(6 * 7)\\n", "main.py")
        result = sb.exec(["python3", "main.py"])
    assert result.outcome.kind == "exit" and result.stdout == b"42\\n"
    print(result.isolation.to_dict())  # e.g. {'driver': 'bwrap', 'level': 'namespaced', ...}

``run(argv, spec)`` does create, exec and destroy in one call; ``AsyncSandbox`` is the same
API for asyncio code. ``evalsi sandbox probe`` shows which rungs work on this machine.
"""

from evalsi.sandbox._api import AsyncSandbox, Sandbox, SandboxEscape, SandboxFileError, run
from evalsi.sandbox._config import (
    CONCURRENCY_ENV,
    SandboxConfig,
    SandboxConfigError,
    configure,
    current_config,
    local_concurrency,
    parse_config,
)
from evalsi.sandbox._driver import Driver
from evalsi.sandbox._ladder import Ladder, UnavailableDriver, build_default_ladder, default_ladder
from evalsi.sandbox._none import NoneDriver
from evalsi.sandbox._types import (
    ExecResult,
    Isolation,
    Level,
    Outcome,
    OutputCallback,
    Resources,
    RungReport,
    SandboxSpec,
    SandboxUnavailable,
)

__all__ = [
    "CONCURRENCY_ENV",
    "AsyncSandbox",
    "Driver",
    "ExecResult",
    "Isolation",
    "Ladder",
    "Level",
    "NoneDriver",
    "Outcome",
    "OutputCallback",
    "Resources",
    "RungReport",
    "Sandbox",
    "SandboxConfig",
    "SandboxConfigError",
    "SandboxEscape",
    "SandboxFileError",
    "SandboxSpec",
    "SandboxUnavailable",
    "UnavailableDriver",
    "build_default_ladder",
    "configure",
    "current_config",
    "default_ladder",
    "local_concurrency",
    "parse_config",
    "run",
]
