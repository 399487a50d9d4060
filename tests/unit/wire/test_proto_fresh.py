"""The committed generated code must be exactly what scripts/gen_proto.py makes from proto/.

``proto/`` is the single source of truth: generated files are committed and a test fails when
they are stale.
"""

from __future__ import annotations

import filecmp
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen_proto.py"
COMMITTED = ROOT / "src" / "evalsi" / "_proto"


def run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_committed_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    fresh = tmp_path / "_proto"
    proc = run_script("--out", fresh)
    assert proc.returncode == 0, proc.stderr

    new, old = files(fresh), files(COMMITTED)
    problems = [f"missing from src/evalsi/_proto: {n}" for n in sorted(new - old)]
    problems += [f"not generated from proto/: {n}" for n in sorted(old - new)]
    problems += [
        f"stale: {n}"
        for n in sorted(new & old)
        if not filecmp.cmp(fresh / n, COMMITTED / n, shallow=False)
    ]
    assert not problems, "run `python scripts/gen_proto.py`:\n" + "\n".join(problems)


def test_check_mode_passes_on_a_faithful_copy_and_names_a_stale_file(tmp_path: Path) -> None:
    copy = tmp_path / "_proto"
    shutil.copytree(COMMITTED, copy, ignore=shutil.ignore_patterns("__pycache__"))
    ok = run_script("--check", "--out", copy)
    assert ok.returncode == 0, ok.stderr

    stale = copy / "evalsi" / "v1alpha1" / "record_pb2.py"
    stale.write_text(stale.read_text() + "# edited by hand\n")
    (copy / "evalsi" / "v1alpha1" / "leftover_pb2.py").write_text("")
    failed = run_script("--check", "--out", copy)
    assert failed.returncode == 1
    assert "stale: evalsi/v1alpha1/record_pb2.py" in failed.stderr
    assert "evalsi/v1alpha1/leftover_pb2.py" in failed.stderr
    # --check never writes.
    assert stale.read_text().endswith("# edited by hand\n")


def test_generated_modules_import_under_the_evalsi_package() -> None:
    names = [
        "evalsi._proto.evalsi.v1alpha1.record_pb2",
        "evalsi._proto.evalsi.v1alpha1.score_pb2",
        "evalsi._proto.evalsi.v1alpha1.evaluator_pb2",
        "evalsi._proto.evalsi.v1alpha1.evaluation_service_pb2",
        "evalsi._proto.evalsi.v1alpha1.evaluation_service_connect",
        "evalsi._proto.evalsi.plugin.v1alpha1.plugin_pb2",
        "evalsi._proto.evalsi.plugin.v1alpha1.plugin_connect",
    ]
    for name in names:
        module = importlib.import_module(name)
        assert module.__name__ == name
    from evalsi._proto.evalsi.v1alpha1 import record_pb2

    # Message classes report their real module, so pickling and reprs point at evalsi._proto.
    assert record_pb2.Record.__module__ == "evalsi._proto.evalsi.v1alpha1.record_pb2"
    assert record_pb2.DESCRIPTOR.name == "evalsi/v1alpha1/record.proto"


def test_services_expose_the_planned_methods() -> None:
    from evalsi._proto.evalsi.plugin.v1alpha1 import plugin_pb2
    from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2

    evaluation = evaluation_service_pb2.DESCRIPTOR.services_by_name["EvaluationService"]
    shapes = {m.name: (m.client_streaming, m.server_streaming) for m in evaluation.methods}
    assert shapes == {"Evaluate": (False, False), "EvaluateStream": (True, True)}

    plugin = plugin_pb2.DESCRIPTOR.services_by_name["EvaluatorPluginService"]
    shapes = {m.name: (m.client_streaming, m.server_streaming) for m in plugin.methods}
    assert shapes == {"Describe": (False, False), "Evaluate": (True, True), "Reduce": (True, False)}
