"""PostgreSQL's side of the cross-warehouse copy: rows to Arrow batches, Arrow batches to a temp table.

Reading: one server-side cursor in a read transaction, fetched ``ARROW_BATCH_ROWS`` rows at a time into
typed Arrow arrays (the SELECT already cast what has no Arrow twin, see ``PostgresDialect.export_type``).
Loading: ``CREATE TEMP TABLE`` with the target's DDL types, then ``COPY ... FROM STDIN (FORMAT csv)`` fed
by pyarrow's CSV writer, one batch at a time, so memory stays at one batch.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from rocky_engine.adapters.base import ARROW_BATCH_ROWS, quote_ident
from rocky_engine.adapters.postgres.connection import pyformat
from rocky_engine.adapters.sql_types import SqlType

_cursor_ids = itertools.count(1)


@contextmanager
def read_batches(
    conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: Sequence[Any],
    columns: Sequence[tuple[str, SqlType]],
) -> Iterator[Any]:
    """A ``RecordBatchReader`` over the rows of ``sql``, valid inside the ``with`` block."""
    import pyarrow as pa

    schema = pa.schema([(name, arrow_type(t)) for name, t in columns])
    with conn.transaction(), conn.cursor(name=f"rocky_copy_{next(_cursor_ids)}") as cur:
        cur.execute(pyformat(sql), list(params) or None)

        def batches() -> Iterator[Any]:
            while True:
                rows = cur.fetchmany(ARROW_BATCH_ROWS)
                if not rows:
                    return
                values = list(zip(*rows, strict=True))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(col, type=field.type) for col, field in zip(values, schema, strict=True)],
                    schema=schema,
                )

        yield pa.RecordBatchReader.from_batches(schema, batches())


def load_batches(
    conn: psycopg.Connection[tuple[Any, ...]], table: str, columns: Sequence[tuple[str, str]], reader: Any
) -> None:
    """Create the temp table ``table`` (``columns``: name, DDL type) and COPY every batch into it."""
    import pyarrow.csv as pacsv

    ddl = ", ".join(f"{quote_ident(name)} {type_}" for name, type_ in columns)
    names = ", ".join(quote_ident(name) for name, _ in columns)
    conn.execute(f"CREATE TEMP TABLE {quote_ident(table)} ({ddl})")
    options = pacsv.WriteOptions(include_header=False)
    statement = f"COPY {quote_ident(table)} ({names}) FROM STDIN (FORMAT csv)"
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for batch in reader:
            buf = io.BytesIO()
            pacsv.write_csv(batch, buf, options)
            copy.write(buf.getvalue())


def arrow_type(t: SqlType) -> Any:
    """The Arrow type a column of canonical type ``t`` is built with (text for anything unlisted)."""
    import pyarrow as pa

    f = t.family
    if f == "int":
        return {16: pa.int16(), 32: pa.int32()}.get(t.size or 64, pa.int64())
    if f == "float":
        return pa.float32() if t.size == 32 else pa.float64()
    if f == "decimal":
        return pa.float64() if t.size is None or t.size > 38 else pa.decimal128(t.size, t.scale or 0)
    simple = {
        "bool": pa.bool_(), "date": pa.date32(), "time": pa.time64("us"), "timestamp": pa.timestamp("us"),
        "timestamptz": pa.timestamp("us", tz="UTC"), "blob": pa.binary(),
    }
    return simple.get(f, pa.string())
