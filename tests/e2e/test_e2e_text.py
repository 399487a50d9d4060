"""The text pack guide's commands, run as written on the example files, give sacrebleu's and
rouge-score's numbers (docs/guides/packs/text.md)."""

from __future__ import annotations

import math
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from tests.support.guides import guide_commands, load_jsonl, means, run_json

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "text.md"


def load(name: str) -> list[dict[str, Any]]:
    return load_jsonl(ROOT / "examples" / "text" / name)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "text", tmp_path / "examples" / "text")
    return tmp_path


def test_the_guide_lists_the_commands_this_test_runs() -> None:
    cmds = [" ".join(c) for c in guide_commands(GUIDE)]
    assert (
        "eval --data examples/text/translations.jsonl --evaluators bleu,chrf,rouge-l --format json"
        in cmds
    )
    assert len(cmds) >= 6


def test_bleu_chrf_rouge_l_as_the_guide_shows(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    (args,) = [c for c in guide_commands(GUIDE) if "bleu,chrf,rouge-l" in c]
    got = means(run_json(run_evalsi, workdir, args))
    rows = load("translations.jsonl")
    hyps, refs = [r["output"] for r in rows], [[r["reference"] for r in rows]]
    assert got["bleu"] == sacrebleu.corpus_bleu(hyps, refs).score
    assert got["chrf"] == sacrebleu.corpus_chrf(hyps, refs).score
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    each = [scorer.score(r["reference"], r["output"])["rougeL"] for r in rows]
    assert got["rouge-l"] == pytest.approx(statistics.fmean(s.fmeasure for s in each), abs=1e-12)
    assert got["rouge-l-recall"] == pytest.approx(
        statistics.fmean(s.recall for s in each), abs=1e-12
    )


def test_chrf_plus_plus_ter_and_sentence_bleu(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    (args,) = [c for c in guide_commands(GUIDE) if "bleu,chrf,ter,sentence-bleu" in c]
    assert run_evalsi(workdir, *args).returncode == 0  # the table, as written
    got = means(run_json(run_evalsi, workdir, args))
    rows = load("translations.jsonl")
    hyps, refs = [r["output"] for r in rows], [[r["reference"] for r in rows]]
    assert got["chrf"] == sacrebleu.corpus_chrf(hyps, refs, word_order=2).score
    assert got["ter"] == sacrebleu.corpus_ter(hyps, refs).score
    sentence = [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs[0], strict=True)]
    assert got["sentence-bleu"] == pytest.approx(statistics.fmean(sentence), abs=1e-9)


def test_rouge_on_the_summaries(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    (args,) = [c for c in guide_commands(GUIDE) if "summaries.jsonl" in " ".join(c)]
    got = means(run_json(run_evalsi, workdir, args))
    rows = load("summaries.jsonl")
    for name, kind, stem in [
        ("rouge-1", "rouge1", True),  # the guide turns the stemmer on for rouge-1 only
        ("rouge-2", "rouge2", False),
        ("rouge-l", "rougeL", False),
        ("rouge-lsum", "rougeLsum", False),
    ]:
        scorer = rouge_scorer.RougeScorer([kind], use_stemmer=stem)
        f = [scorer.score(r["reference"], r["output"])[kind].fmeasure for r in rows]
        assert got[name] == pytest.approx(statistics.fmean(f), abs=1e-12), name


def test_perplexity_on_the_logprobs_example(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    (args,) = [c for c in guide_commands(GUIDE) if "perplexity" in c]
    out = run_json(run_evalsi, workdir, args)
    (m,) = out["metrics"]
    assert (m["scored"], m["skipped"]) == (4, 1)
    per_record = []
    for row in load("logprobs.jsonl"):
        raw = row["output"].get("logprobs") if isinstance(row["output"], dict) else None
        raw = raw or row.get("metadata", {}).get("logprobs")
        values = raw["content"] if isinstance(raw, dict) else raw
        if values:
            lp = [v["logprob"] if isinstance(v, dict) else v for v in values]
            per_record.append(math.exp(-statistics.fmean(lp)))
    assert m["mean"] == pytest.approx(statistics.fmean(per_record), rel=1e-12)


def test_a_model_path_that_is_not_a_directory_stops_the_run(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    (args,) = [c for c in guide_commands(GUIDE) if "bertscore" in c]
    proc = run_evalsi(workdir, *args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "param 'model' must be a local model directory" in proc.stderr
