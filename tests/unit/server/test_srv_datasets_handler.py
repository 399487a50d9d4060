"""DatasetHandler without a network: bad names, versions, page sizes, tokens and empty uploads are
bad input naming the field and what it expects; pages read a version to its end and stay on it."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as pb
from evalsi.core import UserError
from evalsi.server._datasets import MAX_PAGE_SIZE, DatasetHandler
from tests.support.server_state import server_state

ROWS = [{"input": f"q{i}", "reference": f"a{i}"} for i in range(5)]


def _handler(tmp_path: Path) -> DatasetHandler:
    return DatasetHandler(server_state(tmp_path, store=":memory:", runs=False))


def _create(handler: DatasetHandler, name: str, rows: list[dict[str, Any]]) -> pb.Dataset:
    request = json_format.ParseDict({"name": name, "rows": rows}, pb.CreateDatasetRequest())
    return asyncio.run(handler.create_dataset(request, None)).dataset


def _get(handler: DatasetHandler, **fields: Any) -> pb.GetDatasetResponse:
    return asyncio.run(handler.get_dataset(pb.GetDatasetRequest(**fields), None))


def _refused(call: Any) -> str:
    with pytest.raises(UserError) as caught:
        asyncio.run(call)
    return caught.value.message


@pytest.mark.parametrize("name", ["", "Upper", "../up", "a/b", "x" * 200])
def test_a_bad_name_is_refused_naming_the_field(tmp_path: Path, name: str) -> None:
    handler = _handler(tmp_path)
    request = json_format.ParseDict({"name": name, "rows": ROWS}, pb.CreateDatasetRequest())
    assert _refused(handler.create_dataset(request, None)).startswith("name: ")
    assert not (tmp_path / "datasets").exists() or not any((tmp_path / "datasets").iterdir())


def test_an_upload_without_rows_is_refused(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    message = _refused(handler.create_dataset(pb.CreateDatasetRequest(name="qa"), None))
    assert message.startswith("rows: empty")


def test_a_bad_version_or_base_version_says_what_a_version_is(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    _create(handler, "qa", ROWS)
    get = handler.get_dataset(pb.GetDatasetRequest(name="qa", version="v1"), None)
    assert _refused(get) == "version: 'v1' is not a version; expected sha256:<64 hex digits>"
    request = json_format.ParseDict(
        {"name": "qa", "baseVersion": "latest", "rows": ROWS}, pb.AppendRowsRequest()
    )
    assert _refused(handler.append_rows(request, None)).startswith("base_version: 'latest'")


@pytest.mark.parametrize("size", [-1, MAX_PAGE_SIZE + 1])
def test_a_page_size_out_of_range_names_the_range(tmp_path: Path, size: int) -> None:
    handler = _handler(tmp_path)
    _create(handler, "qa", ROWS)
    message = _refused(handler.get_dataset(pb.GetDatasetRequest(name="qa", page_size=size), None))
    assert message.startswith(f"page_size: {size} is out of range")
    assert str(MAX_PAGE_SIZE) in message


@pytest.mark.parametrize(
    "token",
    [
        "garbage!",
        base64.urlsafe_b64encode(b"3@v1").decode(),
        base64.urlsafe_b64encode(b"x").decode(),
    ],
)
def test_a_page_token_the_server_did_not_give_is_refused(tmp_path: Path, token: str) -> None:
    handler = _handler(tmp_path)
    _create(handler, "qa", ROWS)
    get = handler.get_dataset(pb.GetDatasetRequest(name="qa", page_size=2, page_token=token), None)
    assert _refused(get) == "page_token: not a token this server gave"


def test_pages_read_every_row_once_and_stay_on_their_version(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    first = _create(handler, "qa", ROWS)
    page = _get(handler, name="qa", page_size=2)
    rows = [json_format.MessageToDict(r) for r in page.rows]
    append = json_format.ParseDict({"name": "qa", "rows": ROWS[:1]}, pb.AppendRowsRequest())
    newer = asyncio.run(handler.append_rows(append, None)).dataset
    assert newer.version != first.version
    assert newer.rows == len(ROWS) + 1
    while page.next_page_token:  # later pages keep to the version the first one read
        page = _get(handler, name="qa", page_size=2, page_token=page.next_page_token)
        assert page.dataset.version == first.version
        rows.extend(json_format.MessageToDict(r) for r in page.rows)
    assert rows == ROWS
    old_token = _get(handler, name="qa", version=first.version, page_size=2).next_page_token
    mixed = pb.GetDatasetRequest(
        name="qa", page_size=2, version=newer.version, page_token=old_token
    )
    message = _refused(handler.get_dataset(mixed, None))
    assert message.startswith("page_token: it belongs to another version")


def test_page_size_zero_is_metadata_only(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    created = _create(handler, "qa", ROWS)
    answer = _get(handler, name="qa")
    assert (answer.dataset.version, answer.dataset.rows) == (created.version, len(ROWS))
    assert list(answer.rows) == []
    assert not answer.next_page_token
