"""The trajectory side of a bundle, checked on its own: ``trajectories.jsonl`` parsed line by
line, and ``tool_calls.jsonl`` / ``end_states.jsonl`` — views of it — derived again and
compared byte for byte.

It needs nothing from the other files but the tasks' keys, so ``validate_bundle`` runs it in a
second process for a large bundle (``PARALLEL_BYTES``) while it checks records and scores: on
two cores the two halves take about as long as each other, and validation is bound by parsing,
not hashing. The result is small: the packed (seq, trial) keys of the tasks that have a
trajectory (the caller checks each against records.jsonl), the counts and the findings.
"""

from __future__ import annotations

import array
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

import evalsi.evidence._format as fmt
from evalsi.evidence._read import end_state_line, tool_call_lines

PARALLEL_BYTES = 16 << 20
"""Trajectory-side bytes from which a second process is worth its start (about 0.1 s)."""
TRIAL_BITS = 20
MAX_FINDINGS = 50


def pack(seq: int, trial: int) -> int:
    """A task's key as one integer that sorts as (seq, trial) does."""
    return (seq << TRIAL_BITS) | trial


@dataclass(slots=True)
class Views:
    """What the trajectory side holds: tasks with a trajectory (packed keys, in order),
    counts, and what is wrong."""

    keys: bytes = b""
    tool_calls: int = 0
    end_states: int = 0
    findings: list[str] = field(default_factory=list)

    def packed(self) -> array.array[int]:
        out = array.array("q")
        out.frombytes(self.keys)
        return out


class Derived:
    """A file whose lines follow from others: each expected line, in order, is compared with
    the file's next line byte for byte, so the file is never parsed and any byte that differs
    is a finding (one a file: after a difference every line would differ)."""

    def __init__(self, directory: Path, name: str, what: str, find: Callable[[str, str], None]):
        self.name = name
        self.what = what
        self.find = find
        self._file: IO[bytes] = fmt.open_regular(directory, name)
        self.line = 0
        self.reported = False

    def expect(self, line: bytes, key: Any) -> None:
        """The next line must be ``line``; ``key`` (a task or a scenario id) names it."""
        got = self._file.readline(fmt.MAX_JSON_BYTES + 1)
        self.line += 1
        if got == line or self.reported:
            return
        self.reported = True
        where = f"task {key}" if isinstance(key, tuple) else f"scenario {key!r}"
        if not got:
            self.find(self.name, f"has no line for {where}")
        else:
            self.find(self.name, f"line {self.line}: {self.what} ({where})")

    def finish(self) -> None:
        if not self.reported and self._file.readline(1):
            self.find(self.name, f"line {self.line + 1}: more lines than the records give")

    def close(self) -> None:
        self._file.close()


def check_views(directory: str) -> Views:
    """Check the trajectory side of the bundle in ``directory`` (a path, so it pickles)."""
    where = Path(directory)
    out = Views()
    keys = array.array("q")

    def find(name: str, message: str) -> None:
        if len(out.findings) < MAX_FINDINGS:
            out.findings.append(f"{name}: {message}")

    calls = Derived(where, fmt.TOOL_CALLS, "not the tool calls of its trajectory", find)
    ends = Derived(where, fmt.END_STATES, "not the end state of its trajectory", find)
    try:
        last = -1
        for number, value in fmt.iter_lines(where, fmt.TRAJECTORIES):
            seq = value.get("seq") if type(value) is dict else None
            trial = value.get("trial") if type(value) is dict else None
            if type(seq) is not int or type(trial) is not int or seq < 0 or trial < 0:
                find(fmt.TRAJECTORIES, f"line {number}: expected seq, trial and trajectory")
                continue
            key = pack(seq, trial)
            if key <= last:
                find(fmt.TRAJECTORIES, f"line {number}: task {(seq, trial)} out of order")
                continue
            last = key
            keys.append(key)
            trajectory = value.get("trajectory")
            if type(trajectory) is not dict or type(trajectory.get("steps")) is not list:
                find(fmt.TRAJECTORIES, f"task {(seq, trial)}: no steps")
                continue
            for call in tool_call_lines(seq, trial, trajectory):
                out.tool_calls += 1
                calls.expect(call, (seq, trial))
            end = end_state_line(seq, trial, trajectory)
            if end is not None:
                out.end_states += 1
                ends.expect(end, (seq, trial))
        calls.finish()
        ends.finish()
    except (ValueError, OSError, fmt.Unsafe) as e:
        find(fmt.TRAJECTORIES, str(e))
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        find(fmt.TRAJECTORIES, f"malformed content ({type(e).__name__}: {str(e)[:200]})")
    finally:
        calls.close()
        ends.close()
    out.keys = keys.tobytes()
    return out


class Background:
    """``check_views`` in a child Python process (``python -m evalsi.evidence._views DIR``):
    a plain subprocess, not multiprocessing, so the caller's ``__main__`` is never imported
    again in the child and no fork happens in a threaded server."""

    def __init__(self, directory: Path) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-m", "evalsi.evidence._views", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def result(self) -> Views:
        out, err = self._child.communicate(timeout=3600)
        if self._child.returncode != 0:
            raise ValueError(
                "the trajectory-side check failed: " + err.decode(errors="replace")[-500:]
            )
        head, _, keys = out.partition(b"\n")
        data = orjson.loads(head)
        return Views(keys, int(data["tool_calls"]), int(data["end_states"]), data["findings"])

    def close(self) -> None:
        """Stop the child if its result was never asked for (validation ended early)."""
        if self._child.poll() is None:
            self._child.kill()
        self._child.communicate()


def main(argv: list[str]) -> int:
    views = check_views(argv[0])
    head = {"tool_calls": views.tool_calls, "end_states": views.end_states}
    sys.stdout.buffer.write(orjson.dumps({**head, "findings": views.findings}) + b"\n")
    sys.stdout.buffer.write(views.keys)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


__all__ = ["PARALLEL_BYTES", "Background", "Derived", "Views", "check_views", "pack"]
