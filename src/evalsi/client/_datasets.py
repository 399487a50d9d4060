"""DatasetService calls for ``AsyncClient`` (a mixin, as ``_policies`` is for the
PolicyService): datasets uploaded in chunks under the request cap, listed and read by page.

``AsyncDatasetMixin`` needs what ``AsyncClient`` has: ``max_request_bytes``, ``_call`` and the
``DatasetServiceClient`` it builds as ``_datasets``. ``project_id=""`` means the client's
project (``_common.scoped``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as ds_pb
from evalsi._proto.evalsi.v1alpha1.dataset_service_connect import DatasetServiceClient
from evalsi.client._specs import dataset_name, raw_rows, row_chunks
from evalsi.wire import DatasetInfo, DatasetPage, dataset_from_proto, dataset_page_from_proto


class AsyncDatasetMixin:
    """``create_dataset``, ``append_rows``, ``upload_dataset``, ``list_datasets``,
    ``get_dataset``, ``list_dataset_versions``."""

    max_request_bytes: int
    _call: Callable[..., Any]
    _datasets: DatasetServiceClient

    async def create_dataset(self, name: str, rows: Iterable[Mapping[str, Any]]) -> DatasetInfo:
        return await self._send_rows(name, rows, base_version=None)

    async def append_rows(
        self, name: str, rows: Iterable[Mapping[str, Any]], *, base_version: str = ""
    ) -> DatasetInfo:
        return await self._send_rows(name, rows, base_version=base_version)

    async def upload_dataset(
        self, path: str, *, name: str = "", project_id: str = ""
    ) -> DatasetInfo:
        """The file at ``path`` as a dataset of ``project_id`` (the client's by default)."""
        return await self._send_rows(
            name or dataset_name(path), raw_rows(path), base_version=None, project_id=project_id
        )

    async def _send_rows(
        self,
        name: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        base_version: str | None,
        project_id: str = "",
    ) -> DatasetInfo:
        info: DatasetInfo | None = None
        for chunk in row_chunks((dict(r) for r in rows), self.max_request_bytes):
            if info is None and base_version is None:
                request: Any = ds_pb.CreateDatasetRequest(
                    name=name, rows=chunk, project_id=project_id
                )
                response = await self._call(self._datasets.create_dataset, request)
            else:
                base = info.version if info is not None else base_version or ""
                request = ds_pb.AppendRowsRequest(
                    name=name, base_version=base, rows=chunk, project_id=project_id
                )
                response = await self._call(self._datasets.append_rows, request)
            info = dataset_from_proto(response.dataset)
        if info is None:
            if base_version is None:
                request = ds_pb.CreateDatasetRequest(name=name, project_id=project_id)
                response = await self._call(self._datasets.create_dataset, request)
                return dataset_from_proto(response.dataset)
            return (await self.get_dataset(name, version=base_version)).dataset
        return info

    async def list_datasets(self) -> list[DatasetInfo]:
        response = await self._call(self._datasets.list_datasets, ds_pb.ListDatasetsRequest())
        return [dataset_from_proto(d) for d in response.datasets]

    async def get_dataset(
        self, name: str, *, version: str = "", page_size: int = 0, page_token: str = ""
    ) -> DatasetPage:
        request = ds_pb.GetDatasetRequest(
            name=name, version=version, page_size=page_size, page_token=page_token
        )
        return dataset_page_from_proto(await self._call(self._datasets.get_dataset, request))

    async def list_dataset_versions(self, name: str) -> list[DatasetInfo]:
        request = ds_pb.ListDatasetVersionsRequest(name=name)
        response = await self._call(self._datasets.list_dataset_versions, request)
        return [dataset_from_proto(d) for d in response.versions]
