"""DatasetService over a real loopback server: create → append → list → get → versions,
content-addressed versions that a run reading the file records too, paging, bad input and
confinement to datasets_dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.dataset_service_connect import (
    DatasetServiceASGIApplication,
    DatasetServiceClientSync,
)
from evalsi.datasets import open_dataset
from evalsi.server._datasets import DatasetHandler
from evalsi.wire import struct_from_proto, struct_to_proto
from tests.support.server_state import server_state, serving

ROWS = [
    {"id": f"q{i}", "input": f"question {i}", "output": "a", "reference": "a"} for i in range(5)
]
MORE = [{"id": "q5", "input": "question 5", "output": "b", "reference": "a", "tags": [1, 2.5]}]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DatasetServiceClientSync, Path]]:
    state = server_state(tmp_path, store=":memory:", runs=False)
    with (
        serving(state, only=(DatasetServiceASGIApplication, DatasetHandler)) as srv,
        DatasetServiceClientSync(srv.url) as client,
    ):
        yield client, state.config.datasets_dir


def _create(client: DatasetServiceClientSync, name: str, rows: list[dict[str, Any]]) -> pb.Dataset:
    request = pb.CreateDatasetRequest(name=name, rows=[struct_to_proto(r) for r in rows])
    return client.create_dataset(request).dataset


def test_create_append_list_get_versions(served: tuple[DatasetServiceClientSync, Path]) -> None:
    client, root = served
    first = _create(client, "qa", ROWS)
    assert first.name == "qa"
    assert first.rows == 5
    assert first.version.startswith("sha256:")
    assert first.path == "qa/" + first.version.replace(":", "-") + ".jsonl"
    assert first.create_time.seconds > 0
    # A run reading the file records the same version the server gave.
    file = root / first.path
    dataset = open_dataset(str(file))
    assert sum(len(b) for b in dataset.iter_batches(100)) == 5
    assert dataset.version == first.version
    appended = client.append_rows(
        pb.AppendRowsRequest(name="qa", rows=[struct_to_proto(r) for r in MORE])
    ).dataset
    assert appended.rows == 6
    assert appended.version != first.version
    assert file.read_bytes().count(b"\n") == 5  # the old version is unchanged
    # Appending to the first version again gives the same content, hence the same version.
    again = client.append_rows(
        pb.AppendRowsRequest(
            name="qa", base_version=first.version, rows=[struct_to_proto(r) for r in MORE]
        )
    ).dataset
    assert again.version == appended.version
    _create(client, "other", ROWS[:1])
    listed = client.list_datasets(pb.ListDatasetsRequest()).datasets
    assert [(d.name, d.version) for d in listed] == [
        ("other", _create(client, "other", ROWS[:1]).version),
        ("qa", appended.version),
    ]
    versions = client.list_dataset_versions(pb.ListDatasetVersionsRequest(name="qa")).versions
    assert [v.version for v in versions] == [appended.version, first.version]  # newest first
    latest = client.get_dataset(pb.GetDatasetRequest(name="qa"))
    assert latest.dataset == versions[0]
    assert not latest.rows
    assert not latest.next_page_token
    old = client.get_dataset(pb.GetDatasetRequest(name="qa", version=first.version, page_size=10))
    assert [struct_from_proto(r) for r in old.rows] == ROWS
    assert not old.next_page_token


def test_same_rows_same_version_in_any_key_order(
    served: tuple[DatasetServiceClientSync, Path],
) -> None:
    client, root = served
    a = _create(client, "a", ROWS)
    shuffled = [dict(reversed(list(r.items()))) for r in ROWS]
    b = _create(client, "b", shuffled)
    assert a.version == b.version
    assert _create(client, "a", ROWS).version == a.version
    assert len(client.list_dataset_versions(pb.ListDatasetVersionsRequest(name="a")).versions) == 1
    assert sorted(p.name for p in (root / "a").iterdir()) == sorted(
        [a.path.split("/")[1], "versions.json"]
    )  # written via a temporary file, nothing left behind


def test_paging_stays_on_its_version(served: tuple[DatasetServiceClientSync, Path]) -> None:
    client, _ = served
    first = _create(client, "paged", ROWS)
    page = client.get_dataset(pb.GetDatasetRequest(name="paged", page_size=2))
    got = [struct_from_proto(r) for r in page.rows]
    # A new version in between does not change what the next pages read.
    client.append_rows(pb.AppendRowsRequest(name="paged", rows=[struct_to_proto(MORE[0])]))
    while page.next_page_token:
        page = client.get_dataset(
            pb.GetDatasetRequest(name="paged", page_size=2, page_token=page.next_page_token)
        )
        assert page.dataset.version == first.version
        got += [struct_from_proto(r) for r in page.rows]
    assert got == ROWS


@pytest.mark.parametrize(
    ("request_", "code", "expected"),
    [
        (pb.CreateDatasetRequest(name="qa"), Code.INVALID_ARGUMENT, "rows: empty"),
        (pb.CreateDatasetRequest(name="", rows=[struct_to_proto({"a": 1})]), Code.INVALID_ARGUMENT,
         "name: '' is not a dataset name"),
        (pb.CreateDatasetRequest(name="../escape", rows=[struct_to_proto({"a": 1})]),
         Code.INVALID_ARGUMENT, "is not a dataset name"),
        (pb.CreateDatasetRequest(name="Upper", rows=[struct_to_proto({"a": 1})]),
         Code.INVALID_ARGUMENT, "is not a dataset name"),
        (pb.GetDatasetRequest(name="missing"), Code.NOT_FOUND, "no dataset 'missing'"),
        (pb.GetDatasetRequest(name="qa", version="v1"), Code.INVALID_ARGUMENT, "version: 'v1'"),
        (pb.GetDatasetRequest(name="qa", version="sha256:" + "0" * 64), Code.NOT_FOUND,
         "has no version"),
        (pb.GetDatasetRequest(name="qa", page_size=10_001), Code.INVALID_ARGUMENT, "page_size"),
        (pb.GetDatasetRequest(name="qa", page_size=-1), Code.INVALID_ARGUMENT, "page_size"),
        (pb.GetDatasetRequest(name="qa", page_size=1, page_token="garbage"),
         Code.INVALID_ARGUMENT, "page_token"),
        (pb.AppendRowsRequest(name="missing", rows=[struct_to_proto({"a": 1})]), Code.NOT_FOUND,
         "no dataset 'missing'"),
        (pb.AppendRowsRequest(name="qa", base_version="nope", rows=[struct_to_proto({"a": 1})]),
         Code.INVALID_ARGUMENT, "base_version"),
        (pb.ListDatasetVersionsRequest(name="missing"), Code.NOT_FOUND, "no dataset"),
    ],
)  # fmt: skip
def test_bad_input_and_unknown_names(
    served: tuple[DatasetServiceClientSync, Path], request_: object, code: Code, expected: str
) -> None:
    client, _ = served
    _create(client, "qa", ROWS)
    method = {
        pb.CreateDatasetRequest: client.create_dataset,
        pb.GetDatasetRequest: client.get_dataset,
        pb.AppendRowsRequest: client.append_rows,
        pb.ListDatasetVersionsRequest: client.list_dataset_versions,
    }[type(request_)]
    with pytest.raises(ConnectError) as caught:
        method(request_)
    assert caught.value.code == code
    assert expected in caught.value.message


def test_a_symlink_out_of_datasets_dir_is_refused(
    served: tuple[DatasetServiceClientSync, Path], tmp_path: Path
) -> None:
    client, root = served
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir(exist_ok=True)
    os.symlink(outside, root / "sneaky")
    with pytest.raises(ConnectError) as caught:
        _create(client, "sneaky", ROWS)
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert "outside" in caught.value.message
    assert list(outside.iterdir()) == []
