"""``compile-check`` and ``lint-check``: does the program compile, is it lint-clean — each run
in the sandbox, since compilers and linters read untrusted input too."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

from evalsi.core import Record, Score, UserError
from evalsi.evaluators import Skip
from evalsi.packs._declare import builtin, clip, passed
from evalsi.packs.code._sandboxed import IsolationName, behaviour, make_spec, run_program_async
from evalsi.packs.code._shapes import extract_code
from evalsi.sandbox import ExecResult

_MESSAGE_CHARS = 2000
_PY = ("python", "py", "python3")
_NO_PYFLAKES = "No module named pyflakes"
_RUFF_RULES = ("E4", "E7", "E9", "F")  # ruff's documented defaults: pyflakes and hard errors


def _program(record: Record) -> str:
    output = record.output
    if output is None or output.kind not in ("text", "messages", "json"):
        kind = output.kind if output is not None else "nothing"
        raise UserError(f"output: expected program text, got {kind}")
    return extract_code(output.as_text())


def _argv(command: list[str], filename: str) -> list[str]:
    if not command or not all(isinstance(a, str) and a for a in command):
        raise UserError("command: expected a non-empty list of arguments, e.g. ['gcc', '{file}']")
    if not any("{file}" in a for a in command):
        raise UserError("command: no argument holds {file}, the program's file name")
    return [a.replace("{file}", filename) for a in command]


def _filename(language: str, filename: str) -> str:
    if filename:
        if "/" in filename or filename.startswith("."):
            raise UserError(f"filename: expected a plain file name, got {filename!r}")
        return filename
    if language.lower() in _PY:
        return "solution.py"
    raise UserError(f"filename: needed for language {language!r} (e.g. 'main.c')")


async def _run(
    record: Record,
    name: str,
    argv: list[str],
    min_isolation: IsolationName,
    timeout_seconds: float,
    memory_mb: int,
    concurrency: int | None,
    read_only_paths: tuple[Path, ...] = (),
) -> ExecResult:
    """Run ``argv`` in the sandbox on the record's program, saved as file ``name``."""
    spec = make_spec(
        min_isolation=min_isolation,
        timeout_seconds=timeout_seconds,
        memory_mb=memory_mb,
        cpu_seconds=timeout_seconds,
        read_only_paths=read_only_paths,
    )
    files = {name: _program(record).encode("utf-8", "surrogatepass")}
    return await run_program_async(files, argv, spec, concurrency=concurrency)


def _message(result: ExecResult) -> str:
    return clip(
        (result.stderr + b"\n" + result.stdout).decode("utf-8", "replace").strip(), _MESSAGE_CHARS
    )


@builtin(
    "code",
    "compile-check",
    passed("compile-check", "the program compiles"),
    example="evalsi eval --data examples/code/solutions.jsonl --evaluators compile-check "
    "--format json",
)
async def compile_check(
    record: Record,
    *,
    language: str = "python",
    command: list[str] | None = None,
    filename: str = "",
    min_isolation: IsolationName = "namespaced",
    timeout_seconds: float = 20.0,
    memory_mb: int = 1024,
    concurrency: int | None = None,
) -> Score:
    """Whether the program compiles, checked in the sandbox (py_compile, or any compiler).

    Python by ``python3 -m py_compile``, any other language by the ``command`` argv template
    (``{file}`` is the program's file name, ``filename``). The compiler's message is the
    explanation."""
    name = _filename(language, filename)
    if command:
        argv = _argv(command, name)
    elif language.lower() in _PY:
        argv = ["python3", "-m", "py_compile", name]
    else:
        raise UserError(
            f"compile-check: language {language!r} needs the command param, an argv template "
            "such as ['gcc', '-fsyntax-only', '{file}'] (python is built in)"
        )
    result = await _run(record, name, argv, min_isolation, timeout_seconds, memory_mb, concurrency)
    meta: dict[str, Any] = {"isolation": result.isolation.to_dict(), "argv": argv}
    if result.outcome.kind != "exit":
        meta["outcome"] = result.outcome.kind
        return Score(passed=False, explanation=f"not compiled: {behaviour(result)}", metadata=meta)
    meta["exit_code"] = result.outcome.code
    ok = result.outcome.code == 0
    message = _message(result)
    if message:
        meta["message"] = message
    explanation = "compiles" if ok else (message or f"exit code {result.outcome.code}")
    return Score(passed=ok, explanation=explanation, metadata=meta)


def find_ruff() -> Path | None:
    """A ruff binary on this host: next to the running interpreter (a virtualenv), else on
    PATH. It is bound read-only into the sandbox at the same path."""
    beside = Path(sys.executable).parent / "ruff"
    for candidate in (str(beside), shutil.which("ruff")):
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    return None


def _ruff_findings(stdout: bytes) -> list[dict[str, Any]]:
    return [
        {
            "code": item.get("code") or "syntax",
            "line": (item.get("location") or {}).get("row"),
            "column": (item.get("location") or {}).get("column"),
            "message": item.get("message", ""),
        }
        for item in json.loads(stdout.decode("utf-8", "replace") or "[]")
    ]


def _line_findings(result: ExecResult, filename: str) -> list[dict[str, Any]]:
    """``file:line:col: message`` lines (pyflakes, most linters); other lines kept as is."""
    out: list[dict[str, Any]] = []
    text = (result.stdout + b"\n" + result.stderr).decode("utf-8", "replace")
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[0].endswith(filename) and parts[1].strip().isdigit():
            col = parts[2].strip()
            out.append(
                {
                    "line": int(parts[1]),
                    "column": int(col) if col.isdigit() else None,
                    "message": parts[3].strip(),
                }
            )
        else:
            out.append({"message": line.strip()})
    return out


@builtin(
    "code",
    "lint-check",
    passed("lint-check", "no lint findings"),
    example="evalsi eval --data examples/code/solutions.jsonl --evaluators lint-check "
    "--format json",
)
async def lint_check(
    record: Record,
    *,
    linter: Literal["auto", "ruff", "pyflakes"] = "auto",
    command: list[str] | None = None,
    filename: str = "solution.py",
    select: list[str] | None = None,
    max_findings: int = 20,
    min_isolation: IsolationName = "namespaced",
    timeout_seconds: float = 20.0,
    memory_mb: int = 1024,
    concurrency: int | None = None,
) -> Score:
    """Whether the Python program is lint-clean, linted in the sandbox (ruff or pyflakes).

    ruff (this host's binary, bound in read-only; rules ``select``, default E4,E7,E9,F) when
    found, else ``python3 -m pyflakes``; or any
    ``command`` argv template (``{file}``; non-zero exit = findings, one per output line).
    With no linter visible the record is SKIPPED with the reason, never passed."""
    name = _filename("python", filename)
    ro: tuple[Path, ...] = ()
    if command:
        argv, kind = _argv(command, name), "command"
    else:
        ruff = find_ruff() if linter in ("auto", "ruff") else None
        if ruff is not None:
            rules = ",".join(select or _RUFF_RULES)
            argv = [str(ruff), "check", "--isolated", "--no-cache", "--output-format", "json"]
            argv += ["--select", rules, name]
            ro, kind = (ruff,), "ruff"
        elif linter == "ruff":
            raise Skip("lint-check: no ruff binary on this host (pip install ruff)")
        else:
            argv, kind = ["python3", "-m", "pyflakes", name], "pyflakes"
    result = await _run(
        record, name, argv, min_isolation, timeout_seconds, memory_mb, concurrency, ro
    )
    meta: dict[str, Any] = {"isolation": result.isolation.to_dict(), "linter": kind}
    if result.outcome.kind != "exit":
        meta["outcome"] = result.outcome.kind
        return Score(passed=False, explanation=f"not linted: {behaviour(result)}", metadata=meta)
    code = result.outcome.code
    if kind == "pyflakes" and code != 0 and _NO_PYFLAKES in result.stderr.decode(errors="replace"):
        no_ruff = "no ruff binary on this host and " if linter == "auto" else ""
        raise Skip(
            f"lint-check: no linter is visible inside the sandbox: {no_ruff}the sandbox's "
            "python3 has no pyflakes (apt install python3-pyflakes, pip install ruff, or give "
            "the command param)"
        )
    if kind == "ruff":
        if code not in (0, 1):
            raise UserError(f"lint-check: ruff failed (exit {code}): {_message(result)}")
        findings = _ruff_findings(result.stdout)
    else:
        findings = [] if code == 0 else _line_findings(result, name)
        if code != 0 and not findings:
            findings = [{"message": f"the linter exited with code {code} and said nothing"}]
    meta["findings_count"] = len(findings)
    meta["findings"] = findings[: max(0, max_findings)]
    if not findings:
        return Score(passed=True, explanation=f"no findings ({kind})", metadata=meta)
    first = findings[0]
    where = f"line {first['line']}: " if first.get("line") else ""
    code_tag = f"{first['code']} " if first.get("code") else ""
    explanation = f"{len(findings)} finding(s); first: {where}{code_tag}{first['message']}"
    return Score(passed=False, explanation=explanation[:_MESSAGE_CHARS], metadata=meta)
