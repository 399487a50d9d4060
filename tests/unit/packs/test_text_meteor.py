"""meteor: NLTK's ``meteor_score`` over a local WordNet, or SKIPPED with the exact reason when
no WordNet is installed (evalsi never downloads it).

The scoring tests need Debian's ``wordnet-base`` (``/usr/share/wordnet``); the SKIPPED path
and the bad-param path are tested everywhere.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import nltk
import pytest
from nltk.translate.meteor_score import meteor_score
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

import evalsi
from evalsi.core import Outcome, ParamError
from evalsi.evaluators import Registry
from evalsi.packs import text
from evalsi.packs.text import _meteor

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"
PAIRS = [json.loads(line) for line in (EXAMPLES / "translations.jsonl").read_text().splitlines()]
DEBIAN = Path(_meteor.DEBIAN_WORDNET)
needs_wordnet = pytest.mark.skipif(
    not (DEBIAN / "data.noun").is_file(), reason="apt-get install wordnet-base"
)


def results(rows: list[dict[str, Any]], **params: Any) -> list[Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=["meteor"], params={"meteor": params}, registry=REG, store=":memory:"
    )
    by_id = {x.record_id: x for x in r.results}
    return [by_id[row["id"]] for row in rows]


def test_without_wordnet_every_record_is_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    monkeypatch.setattr(_meteor, "DEBIAN_WORDNET", str(tmp_path / "none"))
    got = results(PAIRS[:3])
    assert {(r.outcome, r.reason) for r in got} == {(Outcome.SKIPPED, _meteor.NO_WORDNET)}
    assert "never downloads" in _meteor.NO_WORDNET


def test_a_wordnet_param_that_is_not_a_wordnet_directory_fails_at_bind(tmp_path: Path) -> None:
    with pytest.raises(ParamError, match="param 'wordnet' must be a directory of WordNet"):
        REG.resolve("meteor").bind({"wordnet": str(tmp_path)})


@pytest.mark.skipif(
    not Path("/usr/share/man/man5/lexnames.5WN.gz").is_file(), reason="wordnet-base man pages"
)
def test_lexnames_match_the_wordnet_manual() -> None:
    page = gzip.decompress(Path("/usr/share/man/man5/lexnames.5WN.gz").read_bytes()).decode()
    rows = re.findall(r"^(\d\d)\t(\S+)", page, re.MULTILINE)
    assert [name for _, name in rows] == [
        line.split("\t")[1] for line in _meteor.LEXNAMES_TEXT.splitlines()
    ]
    assert len(rows) == 45


@needs_wordnet
@pytest.mark.parametrize("tokenize", ["13a", "whitespace"])
def test_meteor_equals_nltk_meteor_score(tokenize: str) -> None:
    wordnet = _meteor.load_wordnet(str(DEBIAN))
    tok = Tokenizer13a()
    split = (lambda s: tok(s).split()) if tokenize == "13a" else str.split
    rows = [
        *PAIRS,
        {"id": "syn", "output": "The car is fast.", "reference": "The automobile is quick."},
    ]
    for row, result in zip(rows, results(rows, tokenize=tokenize), strict=True):
        assert result.outcome is Outcome.SCORED, result.reason
        expected = meteor_score([split(row["reference"])], split(row["output"]), wordnet=wordnet)
        assert result.scores[0].number == expected, row["id"]


@needs_wordnet
def test_synonyms_come_from_wordnet_and_several_references_take_the_best() -> None:
    class NoSynonyms:
        def synsets(self, word: str) -> list[Any]:
            return []

    row = {"id": "syn", "output": "The car is fast .", "reference": "The automobile is quick ."}
    (with_wordnet,) = results([row], tokenize="whitespace")
    plain = meteor_score([row["reference"].split()], row["output"].split(), wordnet=NoSynonyms())
    assert with_wordnet.scores[0].number > plain  # car ~ automobile, fast ~ quick
    multi = {**row, "id": "multi", "reference": ["Dogs bark .", row["reference"]]}
    (best,) = results([multi], tokenize="whitespace", wordnet=str(DEBIAN))
    assert best.scores[0].number == with_wordnet.scores[0].number


@pytest.mark.parametrize(("param", "value"), [("alpha", 5.0), ("gamma", -0.1), ("beta", -1.0)])
def test_meteor_params_out_of_range_are_refused(param: str, value: float) -> None:
    import evalsi
    from evalsi.core import ParamError

    with pytest.raises(ParamError, match=f"meteor: param '{param}'"):
        evalsi.evaluate(
            [{"output": "a", "reference": "a"}],
            ["meteor"],
            params={"meteor": {param: value}},
            store=":memory:",
        )
