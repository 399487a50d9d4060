"""Reviews survive the wire field for field (``review_from_proto(review_to_proto(r)) == r``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalsi.evidence import Review
from evalsi.wire import review_from_proto, review_to_proto

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
verdicts = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), text, st.lists(text, max_size=3)
)


@given(
    st.integers(0, 2**31),
    st.integers(0, 100),
    st.integers(0, 50),
    text,
    st.sampled_from(["approved", "rejected"]),
    verdicts,
    text,
    st.integers(0, 2**40),
)
def test_a_review_round_trips(
    seq: int,
    trial: int,
    index: int,
    who: str,
    approval: str,
    verdict: object,
    rationale: str,
    micros: int,
) -> None:
    review = Review(
        run_id="r1",
        seq=seq,
        trial=trial,
        evaluator=index,
        record_id=f"id{seq}",
        reviewer=who,
        approval=approval,
        verdict=verdict,
        rationale=rationale,
        fingerprint="sha256:" + "0" * 64,
        imported_at=micros / 1e6,
        evaluator_name="exact-match",
    )
    back = review_from_proto(review_to_proto(review))
    assert (
        back.imported_at == review.imported_at or abs(back.imported_at - review.imported_at) < 1e-6
    )
    assert {**vars_of(back), "imported_at": 0} == {**vars_of(review), "imported_at": 0}


def vars_of(review: Review) -> dict[str, object]:
    return {f: getattr(review, f) for f in review.__dataclass_fields__}
