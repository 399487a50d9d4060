"""METEOR per record, by NLTK's ``meteor_score``, which needs the WordNet database.

METEOR aligns hypothesis and reference words by exact match, Porter stem and WordNet synonym,
so it cannot run without WordNet. NLTK does not ship it; ``nltk.download("wordnet")`` fetches it
from the network, which evalsi never does while scoring. evalsi looks, in order, at:

1. the ``wordnet`` param: a directory of WordNet 3.0 database files (``data.noun``,
   ``index.noun``, … as in NLTK's ``corpora/wordnet`` or Debian's ``wordnet-base``);
2. NLTK's own data path (``corpora/wordnet`` or ``corpora/wordnet.zip``, as ``nltk.download``
   leaves it; ``NLTK_DATA`` is honoured);
3. ``/usr/share/wordnet`` (``apt-get install wordnet-base`` on Debian and Ubuntu).

With none of them every record is SKIPPED with ``NO_WORDNET`` as the reason.

Debian's copy lacks two files NLTK's reader opens (``lexnames``, the fixed list of the 45
lexicographer files, and ``index.sense``, used only to map other WordNet versions), so the
reader below serves the first from its documented contents and skips the version mapping.
"""

from __future__ import annotations

import io
import os
import warnings
from functools import cache
from pathlib import Path
from typing import IO, Any, Literal

from evalsi.core import ParamError, Record, Score
from evalsi.evaluators import Skip
from evalsi.packs.text._inputs import hypothesis, need_module, references

NO_WORDNET = (
    "METEOR needs the WordNet database for synonym matching, and none is installed; "
    "evalsi never downloads it: run nltk.download('wordnet') where a network is available, "
    "apt-get install wordnet-base, or set param wordnet to a WordNet 3.0 directory"
)
DEBIAN_WORDNET = "/usr/share/wordnet"

# lexnames(5WN): the lexicographer files in their fixed order, with their syntactic category
_LEXNAMES = (
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
    ("noun.animal", 1), ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1),
    ("noun.cognition", 1), ("noun.communication", 1), ("noun.event", 1), ("noun.feeling", 1),
    ("noun.food", 1), ("noun.group", 1), ("noun.location", 1), ("noun.motive", 1),
    ("noun.object", 1), ("noun.person", 1), ("noun.phenomenon", 1), ("noun.plant", 1),
    ("noun.possession", 1), ("noun.process", 1), ("noun.quantity", 1), ("noun.relation", 1),
    ("noun.shape", 1), ("noun.state", 1), ("noun.substance", 1), ("noun.time", 1),
    ("verb.body", 2), ("verb.change", 2), ("verb.cognition", 2), ("verb.communication", 2),
    ("verb.competition", 2), ("verb.consumption", 2), ("verb.contact", 2), ("verb.creation", 2),
    ("verb.emotion", 2), ("verb.motion", 2), ("verb.perception", 2), ("verb.possession", 2),
    ("verb.social", 2), ("verb.stative", 2), ("verb.weather", 2), ("adj.ppl", 3),
)  # fmt: skip
LEXNAMES_TEXT = "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(_LEXNAMES))


def _is_wordnet_dir(path: Path) -> bool:
    return (path / "data.noun").is_file() and (path / "index.noun").is_file()


@cache
def load_wordnet(directory: str) -> Any:
    """An NLTK WordNet reader over a directory of WordNet database files (cached per path)."""
    nltk = need_module("meteor", "nltk")
    reader_mod = need_module("meteor", "nltk.corpus.reader.wordnet")
    root = str(Path(directory).resolve())
    if root not in nltk.data.path:  # NLTK reads only under its data path (nltk.pathsec)
        nltk.data.path.append(root)

    class DirectoryWordNet(reader_mod.WordNetCorpusReader):  # type: ignore[misc, name-defined]
        def open(self, fileid: str) -> IO[str]:
            if fileid == "lexnames" and not (Path(root) / "lexnames").is_file():
                return io.StringIO(LEXNAMES_TEXT)
            return super().open(fileid)  # type: ignore[no-any-return]

        def map_wn(self, version: str = "wordnet") -> None:
            return None  # no second WordNet version to map from: this one is used as is

    with warnings.catch_warnings():  # "multilingual functions are not available": not used
        warnings.simplefilter("ignore")
        return DirectoryWordNet(root, None)


def find_wordnet(param: str) -> Any | None:
    """The WordNet reader to use, or None when no WordNet is installed."""
    if param:
        path = Path(param).expanduser()
        if not _is_wordnet_dir(path):
            raise ParamError(
                f"meteor: param 'wordnet' must be a directory of WordNet database files "
                f"(data.noun, index.noun, …), got {param!r}"
            )
        return load_wordnet(str(path))
    nltk = need_module("meteor", "nltk")
    for resource in ("corpora/wordnet", "corpora/wordnet.zip"):
        try:
            nltk.data.find(resource)
        except LookupError:
            continue
        return need_module("meteor", "nltk.corpus").wordnet
    if _is_wordnet_dir(Path(DEBIAN_WORDNET)):
        return load_wordnet(DEBIAN_WORDNET)
    return None


class Meteor:
    """METEOR (NLTK's meteor_score), 0-1; SKIPPED when WordNet is not installed.

    Words come from sacrebleu's 13a tokenizer (punctuation split off) or whitespace, then are
    lowercased; with several references the best-scoring one counts (as NLTK does).

    Args:
        wordnet: a directory of WordNet 3.0 database files (default: look where NLTK and
            Debian put it).
        tokenize: ``13a`` (default) or ``whitespace``.
        alpha: METEOR's precision/recall weight.
        beta: the fragmentation penalty's exponent.
        gamma: the fragmentation penalty's weight.
    """

    def __init__(
        self,
        *,
        wordnet: str = "",
        tokenize: Literal["13a", "whitespace"] = "13a",
        alpha: float = 0.9,
        beta: float = 3.0,
        gamma: float = 0.5,
    ) -> None:
        for name, value in (("alpha", alpha), ("gamma", gamma)):
            if not 0.0 <= value <= 1.0:
                raise ParamError(f"meteor: param {name!r} must lie in [0, 1], got {value}")
        if not beta >= 0.0:
            raise ParamError(f"meteor: param 'beta' must be >= 0, got {beta}")
        self._meteor = need_module("meteor", "nltk.translate.meteor_score").meteor_score
        self._split: Any = str.split
        if tokenize == "13a":
            tok = need_module("meteor", "sacrebleu.tokenizers.tokenizer_13a").Tokenizer13a()
            self._split = lambda text: tok(text).split()
        self._weights = {"alpha": alpha, "beta": beta, "gamma": gamma}
        self._wordnet = find_wordnet(os.fspath(wordnet))

    def __call__(self, record: Record) -> Score:
        if self._wordnet is None:
            raise Skip(NO_WORDNET)
        hyp = self._split(hypothesis(record, "meteor"))
        refs = [self._split(r) for r in references(record, "meteor")]
        value = self._meteor(refs, hyp, wordnet=self._wordnet, **self._weights)
        return Score(number=float(value))
