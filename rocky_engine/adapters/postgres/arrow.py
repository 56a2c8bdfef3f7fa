"""PostgreSQL's side of the cross-warehouse copy: each column's Arrow type, Arrow batches to a temp table.

Reading is ``copy_reader`` (``COPY ... TO STDOUT`` as CSV, parsed by pyarrow); the SELECT already cast what
has no Arrow twin, see ``PostgresDialect.export_type``. Loading: ``CREATE TEMP TABLE`` with the target's DDL
types, then ``COPY ... FROM STDIN (FORMAT csv)`` fed by pyarrow's CSV writer, one batch at a time, so memory
stays at one batch.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import psycopg

from rocky_engine.adapters.base import quote_ident
from rocky_engine.adapters.sql_types import SqlType


def load_batches(
    conn: psycopg.Connection[tuple[Any, ...]], table: str, columns: Sequence[tuple[str, str]],
    readers: Sequence[Any],
) -> None:
    """Create the temp table ``table`` (``columns``: name, DDL type) and COPY every batch of ``readers``."""
    import pyarrow.csv as pacsv

    ddl = ", ".join(f"{quote_ident(name)} {type_}" for name, type_ in columns)
    names = ", ".join(quote_ident(name) for name, _ in columns)
    conn.execute(f"CREATE TEMP TABLE {quote_ident(table)} ({ddl})")
    options = pacsv.WriteOptions(include_header=False)
    statement = f"COPY {quote_ident(table)} ({names}) FROM STDIN (FORMAT csv)"
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for reader in readers:
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
