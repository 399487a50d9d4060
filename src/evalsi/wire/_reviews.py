"""Reviews (``evalsi.evidence.Review``: a person's verdict on a result, stored apart from the
automatic scores) <-> ``review_service_pb2.Review``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._proto.evalsi.v1alpha1 import review_service_pb2 as pb
from evalsi.wire._json import value_from_proto, value_to_proto

if TYPE_CHECKING:  # the store's module loads only when a review is read
    from evalsi.evidence import Review


def review_to_proto(review: Review) -> pb.Review:
    message = pb.Review(
        run_id=review.run_id,
        seq=review.seq,
        trial=review.trial,
        record_id=review.record_id,
        evaluator=review.evaluator_name,
        evaluator_index=review.evaluator,
        reviewer=review.reviewer,
        approval=review.approval,
        rationale=review.rationale,
        fingerprint=review.fingerprint,
    )
    message.import_time.FromNanoseconds(round(review.imported_at * 1e9))
    if review.verdict is not None:
        message.verdict.CopyFrom(value_to_proto(review.verdict))
    return message


def review_from_proto(message: pb.Review) -> Review:
    from evalsi.evidence import Review

    return Review(
        run_id=message.run_id,
        seq=message.seq,
        trial=message.trial,
        evaluator=message.evaluator_index,
        record_id=message.record_id,
        reviewer=message.reviewer,
        approval=message.approval,
        verdict=value_from_proto(message.verdict) if message.HasField("verdict") else None,
        rationale=message.rationale,
        fingerprint=message.fingerprint,
        imported_at=message.import_time.ToNanoseconds() / 1e9,
        evaluator_name=message.evaluator,
    )


__all__ = ["review_from_proto", "review_to_proto"]
