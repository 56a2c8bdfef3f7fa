"""Spark over Spark Connect (a local server, a cluster or Databricks Connect): the connection layer.

Phase 1 of issue 19: a library the Spark adapter will be built on, not yet an ``[adapter.NAME] type``.

- ``options``: ``SparkConnectOptions`` (``remote = "sc://host:port"``, token, cluster id, session id)
  parsed without pyspark into an ``Endpoint`` that never shows the token;
- ``connection``: ``SparkConnection.open(options)`` (checked with ``SELECT 1``), ``session()`` per
  worker, ``close()`` of everything it opened;
- ``session``: ``SparkConnectSession``: ``execute`` / ``query`` (tuples) / ``query_arrow`` / ``run`` (the
  seam for Arrow in), ``interrupt()`` from another thread, ``reset()``, ``close()``;
- ``errors``: pyspark's exceptions as ``SparkAdapterError`` with a failure kind;
- ``capabilities``: table format, MERGE, stale-read risk, read without side effects.

Importing this package imports no pyspark: the modules load it on first use.
"""

from __future__ import annotations

from rocky_engine.adapters.spark.errors import SparkAdapterError
from rocky_engine.adapters.spark.options import SparkConnectOptions

__all__ = ["SparkAdapterError", "SparkConnectOptions"]
