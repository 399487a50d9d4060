"""Review files brought back (``evalsi review import | list``): every filled item checked
against its own fingerprint and against what the store and the dataset hold now, the accepted
reviews stored apart from ``results`` (the format and its export: ``_review``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.core import UserError
from evalsi.evidence._review import (
    _FIELDS,
    _MAX_REVIEWER,
    FORMAT,
    FORMAT_VERSION,
    _item,
    _item_id,
    _names,
    _parts,
    _results,
    fingerprint,
)
from evalsi.store import APPROVALS, Review, read_reviews, save_reviews

if TYPE_CHECKING:
    from evalsi.core import RunInfo
    from evalsi.store import SqlStore


@dataclass(frozen=True, slots=True)
class Refused:
    """An item of a review file that was not stored, and why."""

    line: int
    item: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "item": self.item, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What ``import_review`` did with a file: reviews stored, items refused, items skipped
    (no approval given)."""

    path: Path
    run_id: str
    accepted: tuple[Review, ...]
    refused: tuple[Refused, ...]
    skipped: int

    @property
    def exit_code(self) -> int:
        """0 nothing refused, 1 some item was refused."""
        return 1 if self.refused else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "run_id": self.run_id,
            "accepted": [
                {
                    "item": _item_id(r.run_id, r.seq, r.trial, r.evaluator_name),
                    "reviewer": r.reviewer,
                    "approval": r.approval,
                }
                for r in self.accepted
            ],
            "refused": [r.to_dict() for r in self.refused],
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class _Filled:
    """A filled item waiting for its evidence to be checked against the store."""

    line: int
    item: str
    fingerprint: str
    parts: dict[str, str]
    review: Review


@dataclass(slots=True)
class _Import:
    pending: dict[tuple[int, int, int], list[_Filled]] = field(default_factory=dict)
    refused: list[Refused] = field(default_factory=list)
    skipped: int = 0


def import_review(store: SqlStore, path: str | os.PathLike[str]) -> ImportResult:
    """Check a filled review file against the store and store its accepted reviews.

    An item is stored when its review says ``approved`` or ``rejected`` with a rationale and
    a reviewer, and its evidence, automatic verdict and evaluator are what the store and the
    dataset hold now; an item with no approval is skipped; any other is refused, with the
    reason. The reviewer's review of the same result is replaced; ``results`` is not touched.

    Raises:
        UserError: the file cannot be read, a line is not JSON or not an item (named by its
            line number; nothing is stored), or its run is not in the store.
    """
    source = Path(path)
    lines = _lines(source)
    header_line, header = next(lines, (0, None))
    info = _check_header(store, source, header_line, header)
    names = _names(info)
    state = _Import()
    seen: dict[tuple[int, int, int, str], int] = {}
    now = time.time()
    for number, value in lines:
        _collect(state, info, names, seen, now, source, number, value)
    accepted = _verify(store, info, state)
    save_reviews(store, info.id, accepted)
    return ImportResult(
        path=source,
        run_id=info.id,
        accepted=tuple(accepted),
        refused=tuple(sorted(state.refused, key=lambda r: r.line)),
        skipped=state.skipped,
    )


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` of every non-blank line."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise UserError(f"cannot read the review file {path}: {e.strerror or e}") from e
    with f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                yield number, orjson.loads(raw.strip())
            except orjson.JSONDecodeError as e:
                raise UserError(
                    f"{path}:{number}: not valid JSON ({e.msg} at column {e.colno}); "
                    "nothing was stored",
                    hint="each line of a review file is one JSON object: fix or restore it",
                ) from e


def _check_header(store: SqlStore, path: Path, number: int, header: Any) -> RunInfo:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        where = f"{path}:{number}" if number else str(path)
        raise UserError(
            f"{where}: not an evalsi review file (its first line must be the header "
            f'{{"format": "{FORMAT}", ...}})',
            hint="export one with `evalsi review export RUN -o FILE`",
        )
    version = header.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UserError(
            f"{path}: review format version {version!r}; this evalsi reads version "
            f"{FORMAT_VERSION}",
            hint="import it with the evalsi that exported it, or a newer one",
        )
    run_id = header.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise UserError(f"{path}:{number}: the header names no run_id")
    info = store.get_run(run_id)
    if info.id != run_id:  # a prefix matched: the file is of another run
        raise UserError(f"{path}: run {run_id} is not in this store")
    return info


def _collect(
    state: _Import,
    info: RunInfo,
    names: Mapping[str, int],
    seen: dict[tuple[int, int, int, str], int],
    now: float,
    path: Path,
    number: int,
    value: Any,
) -> None:
    """Check one line's item as far as the file alone allows; keep it if filled."""
    if not isinstance(value, dict):
        raise UserError(f"{path}:{number}: not a review item (a JSON object); nothing was stored")
    for name, kind in _FIELDS.items():
        found = value.get(name)
        if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
            raise UserError(
                f"{path}:{number}: the review item has no {name!r} of type "
                f"{getattr(kind, '__name__', kind)}; nothing was stored",
                hint="export the run again and copy the reviews over",
            )
    filled = _filled(info, names, now, number, value)
    if filled is None:
        state.skipped += 1
        return
    if isinstance(filled, str):
        state.refused.append(Refused(number, value["item"], filled))
        return
    r = filled.review
    key = (r.seq, r.trial, r.evaluator, r.reviewer)
    twice = seen.get(key)
    if twice is not None:
        reason = f"reviewed twice by {r.reviewer!r} in this file (also line {twice})"
        state.refused.append(Refused(number, filled.item, reason))
        return
    seen[key] = number
    state.pending.setdefault(key[:3], []).append(filled)


def _filled(
    info: RunInfo, names: Mapping[str, int], now: float, number: int, value: dict[str, Any]
) -> _Filled | str | None:
    """The filled item, why it is refused, or None when it is not filled in."""
    review: dict[str, Any] = value["review"]
    approval = review.get("approval")
    rationale = review.get("rationale") or ""
    reviewer = review.get("reviewer") or ""
    if not isinstance(rationale, str) or not isinstance(reviewer, str):
        return "review.rationale and review.reviewer must be text"
    rationale, reviewer = rationale.strip(), reviewer.strip()
    if approval is None or approval == "":
        if rationale or review.get("verdict") is not None:
            return 'a rationale or verdict but no approval: set "approved" or "rejected"'
        return None
    if approval not in APPROVALS:
        return f'review.approval is {approval!r}: give "approved", "rejected" or null'
    if not rationale:
        return f"{approval} without a rationale: say why in review.rationale"
    if not reviewer:
        return f"{approval} without a reviewer: name yourself in review.reviewer"
    if len(reviewer) > _MAX_REVIEWER:
        return f"review.reviewer is longer than {_MAX_REVIEWER} characters"
    if value["run_id"] != info.id:
        return f"the item is of run {value['run_id']}, the file of run {info.id}"
    index = names.get(value["evaluator"])
    if index is None:
        return f"run {info.id} has no evaluator {value['evaluator']!r}"
    seq, trial = value["seq"], value["trial"]
    edited = value["item"] != _item_id(info.id, seq, trial, value["evaluator"])
    if edited or value["fingerprint"] != fingerprint(value):
        return (
            "edited in the review file: its fingerprint no longer matches its evidence, "
            "automatic verdict or evaluator (only the review may be filled in)"
        )
    return _Filled(
        line=number,
        item=value["item"],
        fingerprint=value["fingerprint"],
        parts=_parts(value),
        review=Review(
            run_id=info.id,
            seq=seq,
            trial=trial,
            evaluator=index,
            record_id=value["record_id"],
            reviewer=reviewer,
            approval=approval,
            verdict=review.get("verdict"),
            rationale=rationale,
            fingerprint=value["fingerprint"],
            imported_at=now,
            evaluator_name=value["evaluator"],
        ),
    )


def _verify(store: SqlStore, info: RunInfo, state: _Import) -> list[Review]:
    """The filled items whose fingerprint the store still gives; the others refused."""
    pending = state.pending
    accepted: list[_Filled] = []
    if pending:
        try:
            with contextlib.closing(_results(store, info)) as results:
                for task, index, result in results:
                    filled = pending.pop((task[0], task[1], index), None)
                    if filled is None:
                        continue  # not reviewed: no item is built
                    current = _item(info, task, index, result)
                    for f in filled:
                        if f.fingerprint == current["fingerprint"]:
                            accepted.append(f)
                        else:
                            state.refused.append(Refused(f.line, f.item, _changed(f, current)))
                    if not pending:
                        break
        except UserError as e:  # the dataset is gone or changed: nothing can be vouched for
            for f in [*accepted, *(f for group in pending.values() for f in group)]:
                state.refused.append(
                    Refused(f.line, f.item, f"its evidence cannot be read again: {e}")
                )
            return []
    for group in pending.values():
        for f in group:
            state.refused.append(
                Refused(
                    f.line,
                    f.item,
                    f"run {info.id} has no result for sample {f.review.seq}, trial "
                    f"{f.review.trial}, evaluator {f.review.evaluator_name!r}",
                )
            )
    return [f.review for f in accepted]


def _changed(filled: _Filled, current: Mapping[str, Any]) -> str:
    now = _parts(current)
    parts = sorted(k for k in filled.parts.keys() | now.keys() if filled.parts.get(k) != now.get(k))
    what = ", ".join(parts) or "its fingerprint"
    return f"the evidence changed since export ({what}): review it again from a new export"


# -- list -------------------------------------------------------------------------------------
def list_reviews(store: SqlStore, run_id: str) -> list[Review]:
    """The stored reviews of run ``run_id`` (an id, a unique prefix or ``latest``), in result
    order, then by reviewer."""
    return read_reviews(store, store.get_run(run_id).id)


__all__ = ["ImportResult", "Refused", "import_review", "list_reviews"]
