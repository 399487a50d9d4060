"""ReviewService calls for ``AsyncClient`` (a mixin, as ``_policies`` is for the
PolicyService): review files of a server's runs, exported, imported and listed.

``AsyncReviewMixin`` needs what ``AsyncClient`` has: ``url``, ``settings``, ``_transport``,
``_call`` and ``_stream``; it builds its ``ReviewServiceClient`` on first use.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import Any

import orjson
from pyqwest import Client as HTTPClient
from pyqwest import HTTPTransport

from evalsi._proto.evalsi.v1alpha1 import review_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.review_service_connect import ReviewServiceClient
from evalsi.client._common import Settings, scoped
from evalsi.core import UserError
from evalsi.evidence import ImportResult, Refused, Review
from evalsi.wire import review_from_proto


class AsyncReviewMixin:
    """``export_review``, ``import_review``, ``list_reviews``."""

    url: str
    settings: Settings
    _transport: HTTPTransport
    _call: Callable[..., Any]
    _stream: Callable[[AsyncIterator[Any]], AsyncIterator[Any]]
    _review_client: ReviewServiceClient | None = None

    @property
    def _reviews(self) -> ReviewServiceClient:
        if self._review_client is None:
            self._review_client = ReviewServiceClient(
                self.url,
                protocol=self.settings.protocol_type,
                http_client=HTTPClient(self._transport),
                send_compression=None,
            )
        return self._review_client

    async def export_review(
        self,
        run_id: str,
        out: str | os.PathLike[str],
        *,
        evaluators: Collection[str] | None = None,
        only_failing: bool = False,
        limit: int | None = None,
        project_id: str = "",
    ) -> int:
        """Write the review file of the server's run ``run_id`` to the new file ``out``
        (``evalsi review export RUN -o FILE --server URL``); returns how many items it holds.

        The file arrives in a temporary file beside ``out`` and takes its name once whole, so
        a failed export leaves nothing under the name; an existing ``out`` is never
        overwritten (it may hold reviews)."""
        path = Path(out)
        if path.exists() or path.is_symlink():
            raise UserError(
                f"{path} exists; a review file is never overwritten (it may hold reviews)",
                hint="choose another -o FILE, or remove it first",
            )
        if evaluators is not None and not evaluators:  # the wire's empty list means all
            raise UserError("evaluators: name at least one evaluator, or give None for all")
        request = pb.ExportReviewRequest(
            id=run_id,
            project_id=project_id,
            evaluators=list(evaluators or ()),
            only_failing=only_failing,
            limit=limit,
        )
        scoped(request, self.settings.project)
        stream = self._reviews.export_review(request, headers=self.settings.headers)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                first = b""
                async for message in self._stream(stream):
                    if b"\n" not in first:  # the header line, for its item count
                        first += message.data
                    f.write(message.data)
            count = _count(first)
            os.chmod(tmp, 0o644)  # as export_review leaves it (mkstemp made it private)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return count

    async def import_review(
        self, path: str | os.PathLike[str], *, project_id: str = ""
    ) -> ImportResult:
        """Send a filled-in review file to the server, which stores its reviews as
        ``evalsi review import`` does locally; what it accepted, refused and skipped."""
        where = Path(path)
        try:
            data = where.read_bytes()
        except OSError as e:
            raise UserError(f"cannot read the review file {where}: {e.strerror or e}") from e
        request = pb.ImportReviewRequest(project_id=project_id, file=data)
        response: pb.ImportReviewResponse = await self._call(self._reviews.import_review, request)
        return ImportResult(
            path=where,
            run_id=response.run_id,
            accepted=tuple(review_from_proto(r) for r in response.accepted),
            refused=tuple(Refused(r.line, r.item, r.reason) for r in response.refused),
            skipped=response.skipped,
        )

    async def list_reviews(self, run_id: str, *, project_id: str = "") -> list[Review]:
        """The reviews stored for the server's run ``run_id``, in result order, then by
        reviewer."""
        request = pb.ListReviewsRequest(id=run_id, project_id=project_id)
        response: pb.ListReviewsResponse = await self._call(self._reviews.list_reviews, request)
        return [review_from_proto(r) for r in response.reviews]


def _count(first: bytes) -> int:
    """The item count of the review file whose first line starts ``first``."""
    try:
        count = orjson.loads(first.split(b"\n", 1)[0]).get("items")
    except (orjson.JSONDecodeError, AttributeError):
        count = None
    if not isinstance(count, int):
        raise UserError("the server sent a review file without a header line")
    return count
