"""Results into an S3-compatible bucket through boto3 (the ``s3`` extra): the rows as
Parquet at ``PREFIX/RUN_ID/results.parquet`` and the summary at ``PREFIX/RUN_ID/summary.json``
— the same keys on every export, so sending a run again replaces, never duplicates. Credentials
come from boto3's usual chain (environment, profile, instance role), never from the spec."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from evalsi.core import UserError, require_extra
from evalsi.sinks._sink import Receipt, ResultRow, RunHeader
from evalsi.sinks._staging import ParquetTable

DEFAULT_PREFIX = "evalsi"


class S3Sink:
    kind = "s3"

    def __init__(
        self, bucket: str, prefix: str = "", endpoint_url: str = "", region: str = ""
    ) -> None:
        require_extra("the s3 sink", "s3", "boto3")
        import boto3  # type: ignore[import-untyped]

        self.bucket = bucket
        self.prefix = (prefix or DEFAULT_PREFIX).strip("/")
        self.target = f"s3://{bucket}/{self.prefix}"
        self.client: Any = boto3.client(
            "s3", endpoint_url=endpoint_url or None, region_name=region or None
        )
        self.table: ParquetTable | None = None
        self.header: RunHeader | None = None

    def _key(self, name: str) -> str:
        assert self.header is not None
        return f"{self.prefix}/{self.header.run_id}/{name}"

    def begin(self, run: RunHeader) -> None:
        self.header = run
        self.table = ParquetTable(run.run_id)

    def write(self, rows: Sequence[ResultRow]) -> None:
        assert self.table is not None
        self.table.write(rows)

    def finish(self, summary: Mapping[str, Any]) -> Receipt:
        assert self.table is not None
        assert self.header is not None
        path = self.table.done()
        body = orjson.dumps(
            {"run": self.header.to_dict(), "summary": dict(summary)},
            option=orjson.OPT_SORT_KEYS,
        )
        results, summary_key = self._key("results.parquet"), self._key("summary.json")
        try:
            self.client.upload_file(str(path), self.bucket, results)
            put = self.client.put_object(
                Bucket=self.bucket, Key=summary_key, Body=body, ContentType="application/json"
            )
        except Exception as e:  # noqa: BLE001 - botocore's ClientError, connection errors
            raise UserError(f"s3 sink {self.target}: {e}") from None
        return Receipt(
            self.kind,
            self.target,
            self.table.rows,
            {"results": results, "summary": summary_key, "summary_etag": put.get("ETag", "")},
        )

    def close(self) -> None:
        if self.table is not None:
            self.table.close()
