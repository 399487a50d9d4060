"""DatasetService: datasets the server keeps, so runs created over the API read data it holds.

Storage is ``_dataset_files`` (content-addressed JSONL under the project's datasets directory,
``ServerConfig.datasets_dir_of``); file work runs on a worker thread so a large upload does
not stall other requests.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Sequence
from typing import Any

from google.protobuf import struct_pb2

from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as pb
from evalsi.core import UserError
from evalsi.server._dataset_files import DatasetFiles, Version, check_name, check_version
from evalsi.server._state import ServerState
from evalsi.wire import struct_from_proto, struct_to_proto

MAX_PAGE_SIZE = 10_000


class DatasetHandler:
    """Implements the generated ``DatasetService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def files(self, request: Any) -> DatasetFiles:
        """The datasets of the request's project."""
        files: DatasetFiles = self.state.dataset_files(request.project_id)
        return files

    async def create_dataset(
        self, request: pb.CreateDatasetRequest, ctx: Any, /
    ) -> pb.CreateDatasetResponse:
        name = check_name(request.name)
        rows = _rows(request.rows)
        stored = await asyncio.to_thread(self.files(request).create, name, rows)
        return pb.CreateDatasetResponse(dataset=_dataset(stored))

    async def append_rows(
        self, request: pb.AppendRowsRequest, ctx: Any, /
    ) -> pb.AppendRowsResponse:
        name = check_name(request.name)
        if request.base_version:
            check_version(request.base_version, "base_version")
        rows = _rows(request.rows)
        stored = await asyncio.to_thread(
            self.files(request).append, name, rows, request.base_version
        )
        return pb.AppendRowsResponse(dataset=_dataset(stored))

    async def list_datasets(
        self, request: pb.ListDatasetsRequest, ctx: Any, /
    ) -> pb.ListDatasetsResponse:
        found = await asyncio.to_thread(self.files(request).latest)
        return pb.ListDatasetsResponse(datasets=[_dataset(v) for v in found])

    async def get_dataset(
        self, request: pb.GetDatasetRequest, ctx: Any, /
    ) -> pb.GetDatasetResponse:
        name = check_name(request.name)
        if not 0 <= request.page_size <= MAX_PAGE_SIZE:
            raise UserError(
                f"page_size: {request.page_size} is out of range; expected 0 (metadata only) "
                f"to {MAX_PAGE_SIZE}"
            )
        version, start = request.version, 0
        if version:
            check_version(version)
        if request.page_token:
            pinned, start = _read_token(request.page_token)
            if version and version != pinned:
                raise UserError("page_token: it belongs to another version than the one asked")
            version = pinned  # later pages stay on the version the first page read
        found = await asyncio.to_thread(self.files(request).get, name, version)
        response = pb.GetDatasetResponse(dataset=_dataset(found))
        if request.page_size:
            if start > found.rows:
                raise UserError(f"page_token: points past the end ({found.rows} rows)")
            rows = await asyncio.to_thread(
                self.files(request).rows, found, start, request.page_size
            )
            response.rows.extend(struct_to_proto(row) for row in rows)
            end = start + len(rows)
            if end < found.rows:
                response.next_page_token = _token(found.version, end)
        return response

    async def list_dataset_versions(
        self, request: pb.ListDatasetVersionsRequest, ctx: Any, /
    ) -> pb.ListDatasetVersionsResponse:
        name = check_name(request.name)
        found = await asyncio.to_thread(self.files(request).versions, name)
        return pb.ListDatasetVersionsResponse(versions=[_dataset(v) for v in reversed(found)])


def _rows(rows: Sequence[struct_pb2.Struct]) -> list[dict[str, Any]]:
    if not rows:
        raise UserError("rows: empty; send at least one row (a JSON object)")
    return [struct_from_proto(row) for row in rows]


def _dataset(v: Version) -> pb.Dataset:
    out = pb.Dataset(name=v.name, version=v.version, rows=v.rows, path=v.path)
    out.create_time.FromNanoseconds(round(v.created * 1e9))
    return out


def _token(version: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{offset}@{version}".encode()).decode()


def _read_token(token: str) -> tuple[str, int]:
    """The (version, row offset) a page token stands for."""
    try:
        offset, _, version = base64.urlsafe_b64decode(token.encode()).decode().partition("@")
        start = int(offset)
        check_version(version)
    except (binascii.Error, UnicodeError, ValueError, UserError):
        raise UserError(
            "page_token: not a token this server gave", hint="pass next_page_token unchanged"
        ) from None
    if start < 0:
        raise UserError("page_token: not a token this server gave")
    return version, start


__all__ = ["MAX_PAGE_SIZE", "DatasetHandler"]
