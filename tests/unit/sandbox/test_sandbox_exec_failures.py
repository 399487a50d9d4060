"""An exec that fails is told apart on every rung: what the program's files decide (not found:
127, not executable: 126) is the program's outcome; an argument list the kernel refuses
(E2BIG) means the program never ran, so it is a runner failure, never a scored exit code.

Each case runs on the real rungs (bwrap, landlock, none) that work on this machine; the
control just under the kernel's limits proves the same command line runs when it fits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evalsi.sandbox import (
    Level,
    Sandbox,
    SandboxConfig,
    SandboxSpec,
    SandboxUnavailable,
    build_default_ladder,
)

MAX_ARG_STRLEN = 131072  # bytes of one argument with its NUL (32 pages; Linux)
RUNGS = ("bwrap", "landlock", "none")


@pytest.fixture(params=RUNGS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    rung = request.param
    ladder = build_default_ladder(SandboxConfig(drivers=(rung,), cgroups=False))
    try:
        box = Sandbox.create(SandboxSpec(min_isolation=Level.NONE), ladder=ladder)
    except SandboxUnavailable as e:
        pytest.skip(f"{rung} does not work here: {e}")
    with box:
        assert box.isolation.driver == rung
        yield box


COUNT = "import sys; print(sum(len(a) for a in sys.argv[1:]))"


def test_an_argument_just_under_the_kernel_limit_runs(sandbox: Sandbox) -> None:
    arg = "x" * (MAX_ARG_STRLEN - 1)
    result = sandbox.exec(["python3", "-c", COUNT, arg])
    assert result.outcome.kind == "exit", result.outcome
    assert (result.exit_code, result.stdout) == (0, f"{len(arg)}\n".encode())


@pytest.mark.parametrize(
    "extra",
    [
        ["x" * MAX_ARG_STRLEN],  # one string one byte over MAX_ARG_STRLEN
        ["x" * 3_000_000],  # the 3 MB argument of the report
        ["x" * 1000] * 3000,  # 3 MB in short strings: over ARG_MAX (a quarter of the stack)
    ],
    ids=["one-over-strlen", "3mb-argument", "3mb-in-3000-strings"],
)
def test_an_argv_the_kernel_refuses_is_a_runner_failure(sandbox: Sandbox, extra: list[str]) -> None:
    result = sandbox.exec(["python3", "-c", COUNT, *extra])
    assert result.outcome.kind == "runner_failure", result.outcome
    assert result.outcome.is_infra
    assert result.exit_code is None  # nothing to score
    assert "Argument list too long" in result.outcome.detail


def test_a_missing_command_is_the_programs_127(sandbox: Sandbox) -> None:
    result = sandbox.exec(["no-such-command-xyz"])
    assert (result.outcome.kind, result.exit_code) == ("exit", 127)
    assert b"no-such-command-xyz" in result.stderr


def test_a_file_that_is_not_a_program_is_the_programs_126(sandbox: Sandbox) -> None:
    sandbox.copy_in(b"\x7fELF not really", "bad", mode=0o755)
    result = sandbox.exec(["./bad"])
    assert (result.outcome.kind, result.exit_code) == ("exit", 126)
    assert b"Exec format error" in result.stderr


def test_a_file_without_execute_permission_is_the_programs_126(sandbox: Sandbox) -> None:
    sandbox.copy_in(b"#!/bin/sh\necho hi\n", "script.sh", mode=0o644)
    result = sandbox.exec(["./script.sh"])
    assert (result.outcome.kind, result.exit_code) == ("exit", 126)
