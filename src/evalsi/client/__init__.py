"""`evalsi.Client`: the server's API from Python (sync and async), returning the same result
types as the embedded API."""

from evalsi.client._aclient import AsyncClient
from evalsi.client._client import Client
from evalsi.client._common import StreamUpdate
from evalsi.client._errors import ServerUnavailable
from evalsi.client._ingest import INGEST_RETRY, IngestRetry
from evalsi.client._results import RemoteRunResult, RemoteScoreResult
from evalsi.wire import ConnectorInfo, DatasetInfo, DatasetPage, PackInfo

__all__ = [
    "INGEST_RETRY",
    "AsyncClient",
    "Client",
    "ConnectorInfo",
    "DatasetInfo",
    "DatasetPage",
    "IngestRetry",
    "PackInfo",
    "RemoteRunResult",
    "RemoteScoreResult",
    "ServerUnavailable",
    "StreamUpdate",
]
