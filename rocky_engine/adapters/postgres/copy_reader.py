"""PostgreSQL's reader on the copy seam: ``COPY (SELECT ...) TO STDOUT (FORMAT csv)`` parsed by pyarrow.

Why this reader (bench/replication_peers.md, phase 2): the rows never become Python objects. The server
writes CSV, the bytes are gathered into blocks straight from libpq (no per-row Python beyond one C call
that hands over a row's bytes), and pyarrow's streaming CSV reader parses each block in C++ into typed
arrays with the exact schema of the catalog read (``decimal128(p, s)``, ``timestamp(us, UTC)``, ...).
Memory stays at a few blocks whatever the table's size. It needs nothing beyond psycopg and pyarrow,
which the project already requires; connectorx and ADBC measured no faster on this copy (and connectorx
materialises the whole table).

How the text is made exact:

- the session runs the COPY inside its read transaction with (transaction-local) TimeZone UTC (every
  ``timestamptz`` arrives as ``...+00``), DateStyle ISO, and ``extra_float_digits = 3`` (floats print with
  every digit a round trip needs, whatever the server's default);
- ``ENCODING 'UTF8'`` on the COPY itself, so the bytes are UTF-8 whatever the client encoding;
- NULL is the unquoted empty field, an empty string the quoted ``""`` (pyarrow: ``null_values=[""]``,
  ``quoted_strings_can_be_null=False``); booleans are ``t``/``f``;
- ``bytea`` arrives in its ``\\x`` hex text form and is decoded per batch (the one row-wise step, only for
  binary columns, which replicated tables rarely carry).
"""

from __future__ import annotations

import io
import select
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import pq

from rocky_engine.adapters.postgres.arrow import arrow_type
from rocky_engine.adapters.postgres.connection import pyformat
from rocky_engine.adapters.sql_types import SqlType

#: bytes pyarrow parses at a time: large enough to amortise a block's overhead, small enough for memory
CSV_BLOCK_BYTES = 4 << 20
#: bytes gathered from libpq before handing them to pyarrow's reader
_GATHER_BYTES = 1 << 20

#: the settings the CSV text depends on, for this transaction only (one round trip: set_config)
_SESSION = (
    "SELECT set_config('TimeZone', 'UTC', true), set_config('DateStyle', 'ISO, MDY', true), "
    "set_config('extra_float_digits', '3', true)"
)


@contextmanager
def read_csv_batches(
    conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: Sequence[Any],
    columns: Sequence[tuple[str, SqlType]],
) -> Iterator[Any]:
    """A ``RecordBatchReader`` over the rows of ``sql``, valid inside the ``with`` block."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    schema = pa.schema([(name, arrow_type(t)) for name, t in columns])
    binary = [i for i, (_, t) in enumerate(columns) if pa.types.is_binary(arrow_type(t))]
    # Binary columns are parsed as their hex text and decoded per batch (see the module docstring).
    parsed = pa.schema([pa.field(f.name, pa.string()) if i in binary else f for i, f in enumerate(schema)])
    with conn.transaction():
        conn.execute(_SESSION)
        # COPY takes no bind parameters: psycopg merges them client-side, as literals.
        statement = f"COPY ({pyformat(sql)}) TO STDOUT (FORMAT csv, ENCODING 'UTF8')"
        with conn.cursor() as cur, cur.copy(statement, list(params) or None):
            stream = _CopyStream(conn.pgconn)
            if not stream.peek():  # no rows: pyarrow's reader refuses an empty file
                yield pa.RecordBatchReader.from_batches(schema, iter(()))
                return
            csv = pacsv.open_csv(
                io.BufferedReader(stream, buffer_size=_GATHER_BYTES),
                read_options=pacsv.ReadOptions(column_names=parsed.names, block_size=CSV_BLOCK_BYTES),
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=parsed, strings_can_be_null=True, quoted_strings_can_be_null=False,
                    null_values=[""], true_values=["t"], false_values=["f"],
                ),
            )
            if not binary:
                yield csv
            else:
                yield pa.RecordBatchReader.from_batches(schema, _decode_binary(csv, schema, binary))
            # Drain what the consumer left (a failed target): psycopg's COPY exit needs the stream ended.
            stream.drain()


def _decode_binary(csv: Any, schema: Any, binary: list[int]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in csv:
        arrays = list(batch.columns)
        for i in binary:
            arrays[i] = pa.array(
                [None if v is None else bytes.fromhex(v[2:]) for v in arrays[i].to_pylist()], pa.binary()
            )
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


class _CopyStream(io.RawIOBase):
    """The COPY's bytes as a file: rows pulled from libpq in non-blocking mode, gathered into blocks.

    psycopg's ``Copy.read()`` costs a generator round trip per row (it doubled the read time of 2M rows);
    libpq's ``get_copy_data`` hands over every row already received with one C call, and the socket is
    waited on only when none is left. At the end this stream reads the COPY's final result itself (an
    error the server raised mid-copy arrives there), so psycopg's ``copy`` block exits on an idle
    connection.
    """

    def __init__(self, pgconn: pq.abc.PGconn) -> None:
        self._pgconn = pgconn
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def peek(self) -> bool:
        """Whether the COPY sends any bytes (reads the first block)."""
        if not self._pending and not self._done:
            self._pending = memoryview(self._gather(_GATHER_BYTES))
        return bool(self._pending)

    def readinto(self, buffer: Any) -> int:
        if not self._pending:
            if self._done:
                return 0
            self._pending = memoryview(self._gather(max(len(buffer), _GATHER_BYTES)))
            if not self._pending:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _gather(self, want: int) -> bytes:
        chunks: list[memoryview] = []
        size = 0
        pgconn = self._pgconn
        while size < want and not self._done:
            n, data = pgconn.get_copy_data(1)
            if n > 0:
                chunks.append(data)
                size += n
            elif n == 0:  # nothing buffered: hand over what is gathered, else wait for the socket
                if chunks:
                    break
                self._wait()
            else:  # -1: the copy ended (an error the server raised mid-copy included); -2: libpq failed
                self._done = True
                self._finish()
        return b"".join(chunks)

    def _wait(self) -> None:
        select.select([self._pgconn.socket], [], [])
        self._pgconn.consume_input()

    def _finish(self) -> None:
        pgconn = self._pgconn
        error: psycopg.Error | None = None
        while True:
            while pgconn.is_busy():
                self._wait()
            result = pgconn.get_result()
            if result is None:
                break
            if result.status != pq.ExecStatus.COMMAND_OK and error is None:
                error = psycopg.errors.error_from_result(result, encoding="utf-8")
        if error is not None:
            raise error

    def drain(self) -> None:
        while not self._done:
            self._pending = memoryview(b"")
            self._gather(_GATHER_BYTES)
