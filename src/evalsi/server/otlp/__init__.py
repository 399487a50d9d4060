"""The OTLP receivers: traces (``_receivers``, which also mounts both and names the OTLP ports)
and the log records that are events of spans (``_logs``), over what they share (``_shared``:
in-flight byte budget, raw ``Export`` bytes, error mapping, project header); the decoding of
export requests (``_decode``) and the worker processes that decode and store them
(``_ingest_pool``).
"""
