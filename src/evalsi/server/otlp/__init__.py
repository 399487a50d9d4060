"""The OTLP receivers: traces (``_receivers``, which also mounts both and names the OTLP ports)
and the log records that are events of spans (``_logs``), over what they share (``_shared``:
in-flight byte budget, raw ``Export`` bytes, error mapping, project header); the decoding of
export requests (``_decode``) and the worker processes that decode and store them
(``_ingest_pool``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.server.otlp._ingest_pool import GC_THRESHOLDS, IngestPool, worker_count
    from evalsi.server.otlp._receivers import (
        OtlpOnlyOn,
        is_otlp_path,
        native_grpc_port,
        otlp_binds,
        otlp_handlers,
        otlp_mounts,
        otlp_ports,
    )
    from evalsi.server.otlp._shared import LOGS_SERVICE, SERVICE, RawExport

__all__ = [
    "GC_THRESHOLDS",
    "LOGS_SERVICE",
    "SERVICE",
    "IngestPool",
    "OtlpOnlyOn",
    "RawExport",
    "is_otlp_path",
    "native_grpc_port",
    "otlp_binds",
    "otlp_handlers",
    "otlp_mounts",
    "otlp_ports",
    "worker_count",
]

# Imported on first use (core/_lazy.py): the server loads only the pieces its config asks for.
__getattr__ = lazy_exports(__name__, __file__)
