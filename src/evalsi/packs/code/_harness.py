"""The test harness copied into the sandbox next to the candidate, and the reading of its result.

Design (the threat model is in the package docstring and docs/guides/packs/code.md):

* The harness process (the *parent*) never runs candidate code. It reads ``tests.json`` and
  ``solution.py`` into memory, makes itself non-dumpable (so a sibling process of the same uid
  cannot open its ``/proc/<pid>/{mem,fd,environ}``), then runs each test in a forked *child*.
* A child closes stdin, points its stdout at stderr, then imports the candidate and runs one
  test, catching every ``BaseException``. It reports ``P`` or ``F<message>`` on a private pipe
  and leaves with ``os._exit`` (no atexit hooks, no lingering threads). A child that exits,
  crashes or is killed before reporting fails its test; one that overruns the per-test timeout
  is killed by the parent (the candidate cannot catch SIGKILL).
* Only after every test has run does the parent read the nonce from stdin (the children closed
  their copy of fd 0 before any candidate code ran), and print one line
  ``EVALSI-CODE-RESULT <nonce> <json>`` on stdout, which no child can write to.

So the nonce never exists in a process that runs candidate code, nor in its environment.
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

RESULT_TAG = "EVALSI-CODE-RESULT"

HARNESS = r"""
import builtins, os, select, signal, sys, time, json

TAG = "EVALSI-CODE-RESULT"


def _harden():
    # Non-dumpable: processes of the same uid cannot open our /proc/<pid>/{fd,mem,environ}.
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except Exception:
        return False


def _child(source, setup, test, kind, entry, w):
    write, exit_now = os.write, os._exit  # held before the candidate can replace them

    def report(ok, message=""):
        data = b"P" if ok else b"F" + message.encode("utf-8", "replace")[:4000]
        try:
            write(w, data)
        finally:
            exit_now(0)

    def describe(e):
        text = str(e)
        return type(e).__name__ + (": " + text if text else "")

    def where(e, sources):
        # The innermost line of the test code on the traceback: which assert failed.
        found, tb = "", e.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name in sources:
                lines = sources[name].splitlines()
                n = tb.tb_lineno
                if 0 < n <= len(lines):
                    found = " at `" + lines[n - 1].strip()[:200] + "`"
            tb = tb.tb_next
        return found

    try:
        snapshot = dict(builtins.__dict__)
        module = type(sys)("solution")
        module.__file__ = "/workspace/solution.py"
        sys.modules["solution"] = module
        try:
            exec(compile(source, "solution.py", "exec"), module.__dict__)
        except BaseException as e:
            report(False, "the solution failed to load: " + describe(e))
        builtins.__dict__.clear()  # undo what the solution did to the builtins
        builtins.__dict__.update(snapshot)
        ns = {"__name__": "__evalsi_test__", "__builtins__": builtins}
        if kind != "check":
            ns.update({k: v for k, v in module.__dict__.items() if not k.startswith("__")})
        if entry:
            if not hasattr(module, entry):
                report(False, "the solution defines no " + repr(entry))
            ns["candidate"] = getattr(module, entry)
        sources = {"<setup>": setup, "<test>": test["code"]}
        try:
            if setup:
                exec(compile(setup, "<setup>", "exec"), ns)
            exec(compile(test["code"], "<test>", "exec"), ns)
            if test.get("call"):
                ns[test["call"]]()
        except BaseException as e:  # SystemExit and KeyboardInterrupt fail the test too
            report(False, describe(e) + where(e, sources))
        report(True)
    except BaseException as e:  # the harness's own failure: still a report, never a pass
        report(False, "harness: " + describe(e))


def _gone(pid):
    # Without pidfd_open: has the child ended? (It stays a zombie until waitpid below.)
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().split(b") ", 1)[1][:1] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _run_one(source, spec, test, timeout):
    r, w = os.pipe()
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:  # e.g. a process limit used up by an earlier test's leftovers
        os.close(r)
        os.close(w)
        return {"name": test["name"], "seconds": 0.0, "passed": False, "status": "crashed",
                "error": "could not start the test process: %s" % e}
    if pid == 0:
        try:
            os.close(r)
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            os.dup2(2, 1)  # the candidate's prints go to stderr; stdout is the parent's
            sys.stdout = sys.stderr
        except BaseException:
            os._exit(3)
        _child(source, spec.get("setup", ""), test, spec["kind"], spec.get("entry_point"), w)
        os._exit(3)
    os.close(w)
    data, deadline, timed_out = b"", started + timeout, False
    try:  # readable once the child has exited, even if its children keep the pipe open
        exited_fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited_fd = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        watch = [r] if exited_fd is None else [r, exited_fd]
        wait = left if exited_fd is not None else min(left, 0.01)
        ready, _, _ = select.select(watch, [], [], wait)
        if r in ready:
            data = os.read(r, 8192)  # a verdict is one write of at most PIPE_BUF: atomic
            break
        if exited_fd in ready or (exited_fd is None and _gone(pid)):
            os.set_blocking(r, False)
            try:
                data = os.read(r, 8192)
            except BlockingIOError:
                data = b""
            break
    os.close(r)
    if exited_fd is not None:
        os.close(exited_fd)
    # The child and whatever it left running in its process group go now (the verdict, if
    # any, is in hand): leftovers would starve later tests of CPU and of the process limit.
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass
    _, status = os.waitpid(pid, 0)
    seconds = round(time.monotonic() - started, 4)
    entry = {"name": test["name"], "seconds": seconds}
    if timed_out:
        return dict(entry, passed=False, status="timeout",
                    error="timed out after %gs" % timeout)
    if data == b"P":
        return dict(entry, passed=True, status="passed", error="")
    if data[:1] == b"F":
        return dict(entry, passed=False, status="failed",
                    error=data[1:].decode("utf-8", "replace"))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = {31: "denied by the sandbox (seccomp)", 9: "killed (SIGKILL: a resource limit?)",
               24: "CPU time limit exceeded"}.get(sig, "killed by signal %d" % sig)
        return dict(entry, passed=False, status="crashed", error=why)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return dict(entry, passed=False, status="no-report",
                error="the test process exited (code %d) before the test reported "
                      "(os._exit or a crash)" % code)


def main():
    hardened = _harden()
    with open("tests.json", encoding="utf-8") as f:
        spec = json.load(f)
    with open("solution.py", encoding="utf-8", errors="replace") as f:
        source = f.read()
    for name in ("tests.json", "harness.py"):  # the tests are not there for the solution to read
        try:
            os.unlink(name)
        except OSError:
            pass
    results = [_run_one(source, spec, t, spec["timeout"]) for t in spec["tests"]]
    nonce = sys.stdin.readline().strip()  # read only now: no child ever held it
    line = json.dumps({"tests": results, "hardened": hardened}, separators=(",", ":"))
    sys.stdout.write(TAG + " " + nonce + " " + line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
"""
"""The in-sandbox program (``harness.py``): stdlib only, runs on the sandbox's python3."""


def new_nonce() -> str:
    """A fresh 128-bit nonce for one execution."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class HarnessReport:
    """What the harness reported, or why nothing valid came back."""

    tests: list[dict[str, Any]]
    hardened: bool
    forged_lines: int
    problem: str = ""
    """Empty when a genuine result line was found; else why not."""


def read_report(stdout: bytes, nonce: str) -> HarnessReport:
    """Find the one result line carrying ``nonce``; count tagged lines with any other nonce
    (a forgery attempt, or a candidate echoing the format) so they can be shown."""
    genuine: list[str] = []
    forged = 0
    for raw in stdout.decode("utf-8", "replace").splitlines():
        if not raw.startswith(RESULT_TAG + " "):
            continue
        parts = raw.split(" ", 2)
        if len(parts) == 3 and hmac.compare_digest(parts[1].encode(), nonce.encode()):
            genuine.append(parts[2])
        else:
            forged += 1
    if len(genuine) != 1:
        why = "no result line" if not genuine else f"{len(genuine)} result lines"
        return HarnessReport([], False, forged, f"the harness gave {why}")
    try:
        data = json.loads(genuine[0])
        tests = data["tests"]
        if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
            raise ValueError("tests is not a list of objects")
    except (ValueError, KeyError, TypeError) as e:
        return HarnessReport([], False, forged, f"the harness result is malformed: {e}")
    return HarnessReport(tests, bool(data.get("hardened")), forged)
