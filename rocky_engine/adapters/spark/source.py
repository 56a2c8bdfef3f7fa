"""Spark as a replication source: one SELECT streamed out as Arrow batches (the copy seam's source side).

Spark Connect answers a query with a stream of Arrow batches; ``read_arrow`` hands them on as a
``pyarrow.RecordBatchReader`` as they arrive, so a copy out of Spark holds a few batches in memory, never the
table (``DataFrame.toArrow()`` would collect all of it first). The stream is pyspark's
``SparkConnectClient.to_table_as_iterator`` (pinned pyspark 4.3.0), the call ``toArrow`` itself is built on.

Every batch is cast to the Arrow schema of the query's Spark schema, as ``toArrow`` does: ``TIMESTAMP``
arrives as UTC instants (``timestamp[us, tz=UTC]``), ``TIMESTAMP_NTZ`` as naive ones, decimals keep their
precision and scale. The request is sent inside ``SparkConnectSession.run``, so it carries the session's
interrupt tag even when the target pulls the batches from a thread of its own (DuckDB's Arrow scan does);
an error raised while streaming becomes a ``SparkAdapterError`` like any other statement's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rocky_engine.adapters.spark.errors import to_adapter_error

if TYPE_CHECKING:
    import pyarrow as pa

    from rocky_engine.adapters.spark.session import SparkConnectSession


@contextmanager
def read_arrow(
    session: SparkConnectSession, sql: str, params: Sequence[Any]
) -> Iterator[pa.RecordBatchReader]:
    """The rows of one SELECT as a ``RecordBatchReader``, streamed (closed at the end of the block)."""
    import pyarrow as pa

    def start(spark: Any) -> tuple[pa.Schema, Iterator[Any], Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        df = spark.sql(sql, args=_params(params))
        schema = to_arrow_schema(df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
        client = spark.client
        stream = client.to_table_as_iterator(df._plan.to_proto(client), df._plan.observations)
        # Pull until the first batch (or the end) here, so the request goes out under the session's tag.
        first = next((item for item in stream if isinstance(item, pa.Table)), None)
        return schema, stream, first

    schema, stream, first = session.run(start)
    endpoint = session.endpoint

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            if first is not None:
                yield from first.cast(schema).to_batches()
            for item in stream:
                if isinstance(item, pa.Table):
                    yield from item.cast(schema).to_batches()
        except Exception as exc:
            if not type(exc).__module__.startswith(("pyspark", "grpc", "google")):
                raise
            raise to_adapter_error(exc, adapter=endpoint.adapter, where=endpoint.where,
                                   mask=endpoint.mask) from None

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    try:
        yield reader
    finally:
        reader.close()
        close = getattr(stream, "close", None)
        if callable(close):
            close()  # an abandoned stream releases its gRPC call now, not at garbage collection


def _params(params: Sequence[Any]) -> list[Any] | None:
    """Parameters as Spark binds them exactly: a naive datetime travels as its ISO text, because pyspark
    would turn it into an instant of the client's local time zone (``time.mktime``)."""
    import datetime as dt

    out = [p.isoformat() if isinstance(p, dt.datetime) and p.tzinfo is None else p for p in params]
    return out or None


@contextmanager
def read_arrow_ranges(
    session: SparkConnectSession, statements: Sequence[tuple[str, Sequence[Any]]]
) -> Iterator[list[pa.RecordBatchReader]]:
    """The range reads of one table as ONE stream: Spark parallelises a scan itself, across its executors."""
    sql = " UNION ALL ".join(f"SELECT * FROM ({part}) AS r{i}" for i, (part, _) in enumerate(statements))
    params = [p for _, part_params in statements for p in part_params]
    with read_arrow(session, sql, params) as reader:
        yield [reader]
