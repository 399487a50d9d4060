"""Text pack throughput: corpus BLEU and chrF in evalsi against sacrebleu, in the same run.

    python bench/text_throughput.py                    # 100,000 sentence pairs, best of 3
    python bench/text_throughput.py --pairs 20000 --check   # exit 1 when a target is missed

Pairs are synthesised deterministically: references of 6-40 words drawn with Zipf-like
frequencies from a vocabulary of real English, French, German and Spanish words (accents
included), capitalised and punctuated; hypotheses are the references with machine-translation
style edits (substituted, dropped, inserted and swapped words, changed punctuation).

Timed, each best of ``--repeats`` with the tokenizer caches cleared before every run:

- sacrebleu: ``sacrebleu.corpus_bleu(hyps, [refs])`` / ``corpus_chrf``;
- evalsi (map + reduce): the ``bleu`` / ``chrf`` evaluator run as ``evalsi.evaluate`` runs a
  dataset-scope evaluator — a ``DatasetRunner`` maps every ``Record`` (read output and
  reference, extract the sentence's statistics) and reduces once. Records are built before
  the timer starts, as a dataset reader builds them before grading;
- evalsi end to end (information only): ``evalsi.evaluate(records, [name])`` into an in-memory
  store, which adds record bookkeeping, result rows and a 1,000-resample bootstrap interval.

Target (issue 6): evalsi map + reduce within 1.5x sacrebleu's time, with the same score.
Results go to ``bench/out/text_throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET = 1.5

_VOCABULARY = """
the train to munich does not run today because of a strike station library opens on saturday
only at ten o'clock could you please show me way we spent three days hiking in mountains museum
is closed mondays cat has been asleep sofa since this morning will get lyon about you need book
table restaurant always full fridays she read novels over holidays my doctor told walk more
flight buenos aires left two hours late it rain north country tomorrow where nearest pharmacy
children play park after school bought bread cheese and bottle wine la réunion été reportée
jeudi après-midi merci de laisser vos clés accueil boulangerie au coin rue vend les meilleurs
croissants ville il apprend piano depuis cinq ans enfants étaient ravis voir première neige
notre hôtel est quelques pas du vieux port je voudrais un café sans sucre s'il vous plaît
exposition se termine fin mois die straße ist wegen des marathons gesperrt meine großmutter baut
in ihrem garten tomaten an wir brauchen mehr stühle für gäste brücke wurde vor als zweihundert
jahren erbaut wissen sie wann der nächste bus fährt suppe zu heiß um zu essen nach dem sturm
hatte ganze dorf keinen strom spricht fließend vier sprachen tienda abre las nueve y cierra
ocho mi hermano es enfermero en sevilla contemplamos puesta sol desde el faro receta lleva dos
huevos una taza harina después iglesia gire izquierda siga todo recto se canceló concierto
porque cantante estaba enfermo primera vez que veo mar tren iba lleno así viajamos pie trayecto
"""
WORDS = _VOCABULARY.split()
PUNCT = [",", ";", ":"]
ENDS = [".", ".", ".", "?", "!"]


def synthesise(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """``n`` (hypothesis, reference) pairs, the same for the same seed."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(WORDS))]
    hyps, refs = [], []
    for _ in range(n):
        words = rng.choices(WORDS, weights, k=rng.randint(6, 40))
        for i in range(2, len(words) - 2):
            if rng.random() < 0.06:
                words[i] += rng.choice(PUNCT)
        hyp: list[str] = []
        for w in words:
            roll = rng.random()
            if roll < 0.12:
                hyp.append(rng.choices(WORDS, weights)[0])  # substituted
            elif roll < 0.18:
                continue  # dropped
            elif roll < 0.23:
                hyp += [w, rng.choices(WORDS, weights)[0]]  # inserted
            else:
                hyp.append(w)
        if len(hyp) > 3 and rng.random() < 0.3:
            i = rng.randrange(len(hyp) - 1)
            hyp[i], hyp[i + 1] = hyp[i + 1], hyp[i]  # swapped
        end = rng.choice(ENDS)
        refs.append(" ".join(words).capitalize() + end)
        hyps.append(" ".join(hyp).capitalize() + (end if rng.random() < 0.9 else ""))
    return hyps, refs


def clear_caches() -> None:
    """sacrebleu memoises its tokenizers; every timed run starts cold."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    Tokenizer13a.__call__.cache_clear()
    TokenizerRegexp.__call__.cache_clear()


def best_of(repeats: int, fn: Callable[[], float]) -> tuple[float, float]:
    """(best seconds, the value) over ``repeats`` cold runs."""
    times, value = [], 0.0
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="best of N")
    parser.add_argument("--no-e2e", action="store_true", help="skip the evalsi.evaluate runs")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    import sacrebleu

    import evalsi
    from evalsi.core import Content, Record
    from evalsi.evaluators import DatasetRunner, Registry
    from evalsi.packs import text

    registry = Registry(text.EVALUATORS)
    print(f"synthesising {args.pairs:,} sentence pairs...", file=sys.stderr)
    hyps, refs = synthesise(args.pairs)
    records = [
        Record(id=str(i), output=Content.of_text(h), reference=Content.of_text(r))
        for i, (h, r) in enumerate(zip(hyps, refs, strict=True))
    ]
    words = sum(len(r.split()) for r in refs) / len(refs)

    def ours(name: str) -> Callable[[], float]:
        def run() -> float:
            runner = DatasetRunner(registry.resolve(name).bind({}))
            runner.feed(records)
            result = runner.finish()
            assert runner.errors == 0, runner.first_error
            number = result.scores[0].number
            assert number is not None
            return number

        return run

    def end_to_end(name: str) -> Callable[[], float]:
        def run() -> float:
            got = evalsi.evaluate(records, [name], registry=registry, store=":memory:")
            mean = got.metric(name).mean
            assert mean is not None
            return mean

        return run

    sides: dict[str, tuple[Callable[[], float], Callable[[], float]]] = {
        "bleu": (lambda: sacrebleu.corpus_bleu(hyps, [refs]).score, ours("bleu")),
        "chrf": (lambda: sacrebleu.corpus_chrf(hyps, [refs]).score, ours("chrf")),
    }
    report: dict[str, Any] = {"pairs": args.pairs, "mean_reference_words": words, "metrics": {}}
    checks: list[tuple[str, bool, str]] = []
    header = f"{'metric':6s} {'sacrebleu':>10s} {'evalsi':>10s} {'ratio':>6s} {'e2e':>8s}  value"
    print(f"{args.pairs:,} pairs, {words:.1f} reference words on average, best of {args.repeats}")
    print(header)
    for name, (theirs, mine) in sides.items():
        t_ref, v_ref = best_of(args.repeats, theirs)
        t_ours, v_ours = best_of(args.repeats, mine)
        t_e2e, v_e2e = (0.0, v_ours) if args.no_e2e else best_of(1, end_to_end(name))
        ratio = t_ours / t_ref
        report["metrics"][name] = {
            "sacrebleu_s": t_ref,
            "evalsi_s": t_ours,
            "ratio": ratio,
            "evalsi_evaluate_s": t_e2e if not args.no_e2e else None,
            "sacrebleu_value": v_ref,
            "evalsi_value": v_ours,
        }
        e2e = "-" if args.no_e2e else f"{t_e2e:7.2f}s"
        print(f"{name:6s} {t_ref:9.2f}s {t_ours:9.2f}s {ratio:5.2f}x {e2e:>8s}  {v_ours:.4f}")
        checks.append(
            (f"{name}: evalsi within {TARGET}x sacrebleu", ratio <= TARGET, f"{ratio:.2f}x")
        )
        same = v_ours == v_ref and v_e2e == v_ref
        checks.append((f"{name}: same score as sacrebleu", same, f"{v_ours!r} vs {v_ref!r}"))
    report["checks"] = [{"check": c, "met": ok, "value": v} for c, ok, v in checks]
    OUT.mkdir(exist_ok=True)
    (OUT / "text_throughput.json").write_text(json.dumps(report, indent=2))
    for check, ok, value in checks:
        print(f"{'MET ' if ok else 'MISS'}  {check}: {value}")
    return 1 if args.check and not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
