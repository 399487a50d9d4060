"""No tracked file cites a design note that is not in the repository.

The project grew from design notes that were never committed (``DESIGN.md`` and its numbered
"tenets" and sections, ``STACK.md``, ``STYLE.md``, a seed folder, an architecture plan in a
shared folder). A reader of the repository cannot open them, so a reference to them explains
nothing: the text says the idea itself, or points to ``docs/ARCHITECTURE.md`` or a record in
``docs/decisions/``. This test fails when such a citation comes back, naming file and line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    r"\bDESIGN\b": "DESIGN.md (its tenets, sections, contracts)",
    r"\bSTACK\.md\b": "STACK.md",
    r"\bSTYLE(?:\.md\b|:)": "STYLE.md",
    r"(?<![\w-])seeds/": "the seeds/ folder",
    r"evalsi-architecture-plan": "the architecture plan",
    r"(?i)\barchitecture plan\b": "the architecture plan",
    r"\.\./shared\b": "a shared folder outside the repository",
    r"(?i)\btenets? \d": "a numbered tenet of DESIGN.md",
}


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in out.split("\0") if name]


def test_no_citation_of_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    patterns = [(re.compile(p), what) for p, what in FORBIDDEN.items()]
    found = []
    files = _tracked_text_files()
    assert len(files) > 100, "git ls-files listed (almost) nothing"
    for path in files:
        if path.resolve() == this or not path.is_file():
            continue  # this file names the patterns; a file deleted in the work tree is gone
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            for pattern, what in patterns:
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: cites {what}: {line[:100]}")
    assert not found, "say the idea itself, or point to a doc in the repository:\n" + "\n".join(
        found
    )
