"""Child program of the replication-peers workload: the direct PostgreSQL -> DuckDB paths, no framework.

Each mode is the shortest correct program for one reader, so the workload can tell what the wire and the
reader cost without any tool around them. Runs as its own process (the harness reads its wall time and peak
RSS with wait4); only the mode's own driver is imported.

    replication_peers_direct.py MODE PASS URI DB PAIRS_JSON

MODE (the interpreter is the venv that has the driver; see replication_peers_configs.py):
    cx          connectorx `read_sql(return_type="arrow")`: the whole table as one Arrow table, then CTAS
    cx-stream   connectorx `return_type="arrow_stream"` (record batches of 100,000 rows) into CTAS
    cx-p2/p4    connectorx `partition_on="id"`, 2 or 4 partitions read concurrently, then CTAS
    adbc        the ADBC PostgreSQL driver (binary COPY parsed in C++), its batch stream into CTAS
    adbc-p2     two ADBC connections, each streaming half of the `id` range, one CTAS over both streams
    pgscan      DuckDB's postgres extension (duckdb 1.5.5 venv): ATTACH, then CTAS from the attached table
    copy-csv    psycopg `COPY (SELECT ...) TO STDOUT (FORMAT csv)` parsed by pyarrow's CSV reader in
                batches (no row-wise Python), into CTAS
PASS: `first` (CREATE TABLE ... AS over the whole table, into an empty DuckDB file) or `second` (read
MAX(updated_at) of the target, copy only newer rows, INSERT).
PAIRS_JSON: [[source "schema.table", target "schema.table", select list], ...]; the select list casts each
column to the target type rocky would create (`CAST(amount AS DECIMAL(12,2)) AS amount`, ...), because
connectorx hands numeric over as DECIMAL(38,10) and ADBC as text: every path lands the same table.

Prints {"rows": N, "inproc_s": connect-to-close seconds, "import_s": seconds}.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import json  # noqa: E402 - after _T0 so import_s covers every import of this program
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import duckdb  # noqa: E402

_BASE_IMPORT_S = time.perf_counter() - _T0
MODES = ("cx", "cx-stream", "cx-p2", "cx-p4", "adbc", "adbc-p2", "pgscan", "copy-csv")
STREAM_BATCH = 100_000
_IMPORT_S = 0.0


def _import(name: str) -> Any:
    global _IMPORT_S
    start = time.perf_counter()
    module = __import__(name, fromlist=["_"])
    _IMPORT_S += time.perf_counter() - start
    return module


def _since(con: duckdb.DuckDBPyConnection, target: str) -> str:
    """The target's high-water mark as an ISO instant (the rows the second pass must copy are newer)."""
    row = _one(con, f"SELECT strftime(max(updated_at)::TIMESTAMPTZ AT TIME ZONE 'UTC', "
                    f"'%Y-%m-%d %H:%M:%S.%f') FROM {target}")
    if row[0] is None:
        raise SystemExit(f"second pass: {target} is empty; run the first pass first")
    return f"{row[0]}+00"


def _query(source: str, since: str | None) -> str:
    where = f" WHERE updated_at > '{since}'::timestamptz" if since else ""
    return f"SELECT * FROM {source}{where}"


def _land(con: duckdb.DuckDBPyConnection, target: str, first: bool, parts: list[Any], select: str) -> None:
    """CTAS (first pass) or INSERT (second pass) from Arrow tables or record batch readers.

    Several parts (concurrent range streams) go into one statement, so DuckDB pulls them in parallel.
    """
    names = [f"incoming_{i}" for i in range(len(parts))]
    for name, part in zip(names, parts, strict=True):
        con.register(name, part)
    try:
        union = " UNION ALL ".join(f"SELECT {select} FROM {name}" for name in names)
        verb = f"CREATE TABLE {target} AS" if first else f"INSERT INTO {target}"
        con.execute(f"{verb} {union}")
    finally:
        for name in names:
            con.unregister(name)


Reader = Callable[[str, str, str | None], Any]  # (uri, source, since) -> Arrow table or reader


def _cx(partitions: int | None, stream: bool = False) -> Reader:
    cx = _import("connectorx")

    def read(uri: str, source: str, since: str | None) -> Any:
        query = _query(source, since)
        if stream:
            return cx.read_sql(uri, query, return_type="arrow_stream", batch_size=STREAM_BATCH)
        if partitions and since is None:
            return cx.read_sql(uri, query, return_type="arrow", partition_on="id", partition_num=partitions)
        return cx.read_sql(uri, query, return_type="arrow")

    return read


#: connections kept for the whole run, by (driver, slot): a connection per table would time a login (and,
#: for ADBC, its load of the server's type catalog) 200 times
_CONNS: dict[tuple[str, int], Any] = {}
#: what to close once DuckDB has consumed the current table's streams (cursors, COPY contexts)
_OPEN: list[Callable[[], None]] = []


def _conn(driver: str, uri: str, slot: int = 0) -> Any:
    key = (driver, slot)
    if key not in _CONNS:
        if driver == "adbc":
            _CONNS[key] = _import("adbc_driver_postgresql.dbapi").connect(uri)
        else:
            _CONNS[key] = _import("psycopg").connect(uri, autocommit=True)
            _CONNS[key].execute("SET timezone = 'UTC'")
    return _CONNS[key]


def _close_open() -> None:
    for close in _OPEN:
        close()
    _OPEN.clear()


def _adbc_reader(uri: str, source: str, since: str | None, slot: int = 0) -> Any:
    """A batch stream of `source` over this slot's connection; the cursor closes after the table."""
    cur = _conn("adbc", uri, slot).cursor()
    cur.execute(_query(source, since))
    _OPEN.append(cur.close)
    return cur.fetch_record_batch()


def _copy_csv_reader(uri: str, source: str, since: str | None) -> Any:
    """psycopg COPY TO STDOUT (CSV) as a file object for pyarrow's streaming CSV reader."""
    import io

    pa = _import("pyarrow")
    pacsv = _import("pyarrow.csv")
    conn = _conn("psycopg", uri)
    cols = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        [source]).fetchall()
    schema = pa.schema([(name, _arrow_type(pa, pg_type)) for name, pg_type in cols])
    copy_cm = conn.cursor().copy(f"COPY ({_query(source, since)}) TO STDOUT (FORMAT csv)")
    copy = copy_cm.__enter__()

    class Stream(io.RawIOBase):
        def __init__(self) -> None:
            self._buf = memoryview(b"")

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            while not self._buf:
                chunk = copy.read()
                if not chunk:
                    return 0
                self._buf = memoryview(bytes(chunk))
            n = min(len(b), len(self._buf))
            b[:n] = self._buf[:n]
            self._buf = self._buf[n:]
            return n

    _OPEN.append(lambda: copy_cm.__exit__(None, None, None))
    return pacsv.open_csv(
        io.BufferedReader(Stream(), buffer_size=1 << 20),
        read_options=pacsv.ReadOptions(column_names=schema.names, block_size=8 << 20),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types=schema, strings_can_be_null=True,
                                             quoted_strings_can_be_null=False, null_values=[""],
                                             true_values=["t"], false_values=["f"]),
    )


def _arrow_type(pa: Any, pg_type: str) -> Any:
    if pg_type.startswith("numeric("):
        precision, scale = pg_type[len("numeric("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    simple = {
        "bigint": pa.int64(), "integer": pa.int32(), "smallint": pa.int16(), "double precision": pa.float64(),
        "real": pa.float32(), "boolean": pa.bool_(), "date": pa.date32(),
        "timestamp with time zone": pa.timestamp("us", tz="UTC"), "timestamp without time zone":
        pa.timestamp("us"),
    }
    return simple.get(pg_type, pa.string())


def _adbc_p2(uri: str, source: str, since: str | None) -> Any:
    """Two streams over the two halves of the id range, concatenated by one DuckDB statement."""
    if since is not None:
        return _adbc_reader(uri, source, since)
    with _conn("adbc", uri).cursor() as cur:
        cur.execute(f"SELECT min(id), max(id) FROM {source}")
        lo, hi = cur.fetchone()
    mid = (int(lo) + int(hi)) // 2
    return [_adbc_reader(uri, f"(SELECT * FROM {source} WHERE id <= {mid}) AS lo", None, 0),
            _adbc_reader(uri, f"(SELECT * FROM {source} WHERE id > {mid}) AS hi", None, 1)]


def _copy_pairs(mode: str, first: bool, uri: str, db: str, pairs: list[tuple[str, str, str]]) -> int:
    readers: dict[str, Callable[[], Reader]] = {  # factories: import only this mode's driver
        "cx": lambda: _cx(None), "cx-stream": lambda: _cx(None, stream=True), "cx-p2": lambda: _cx(2),
        "cx-p4": lambda: _cx(4), "adbc": lambda: _adbc_reader, "adbc-p2": lambda: _adbc_p2,
        "copy-csv": lambda: _copy_csv_reader,
    }
    read = readers[mode]()
    con = duckdb.connect(db)
    rows = 0
    for source, target, select in pairs:
        schema = target.split(".")[0]
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        since = None if first else _since(con, target)
        before = 0 if first else _count(con, target)
        data = read(uri, source, since)
        _land(con, target, first, data if isinstance(data, list) else [data], select)
        _close_open()
        rows += _count(con, target) - before
    con.close()
    for conn in _CONNS.values():
        conn.close()
    return rows


def _count(con: duckdb.DuckDBPyConnection, target: str) -> int:
    return int(_one(con, f"SELECT count(*) FROM {target}")[0])


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The single row of `sql`, fetched to the end (duckdb 2 refuses the next statement while a result is
    still open, and fetchone leaves it open)."""
    rows = con.execute(sql).fetchall()
    return tuple(rows[0]) if rows else (None,)


def _pgscan(first: bool, uri: str, db: str, pairs: list[tuple[str, str, str]]) -> int:
    """DuckDB's postgres extension, LOADed by path (see bench/setup_peers.sh), reading through ATTACH."""
    ext = Path(sys.executable).resolve().parents[1] / "postgres_scanner.duckdb_extension"
    if not ext.is_file():  # a venv's python is a symlink to the base interpreter: look next to the venv
        ext = Path(sys.executable).parents[1] / "postgres_scanner.duckdb_extension"
    con = duckdb.connect(db)
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{uri}' AS pgsrc (TYPE postgres, READ_ONLY)")
    rows = 0
    for source, target, select in pairs:
        schema = target.split(".")[0]
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        if first:
            con.execute(f"CREATE TABLE {target} AS SELECT {select} FROM pgsrc.{source}")
            rows += _count(con, target)
        else:
            since = _since(con, target)
            before = _count(con, target)
            con.execute(f"INSERT INTO {target} SELECT {select} FROM pgsrc.{source} "
                        f"WHERE updated_at > TIMESTAMPTZ '{since}'")
            rows += _count(con, target) - before
    con.close()
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] not in MODES or argv[1] not in ("first", "second"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, phase, uri, db, pairs_path = argv
    pairs = [(str(s), str(t), str(sel)) for s, t, sel in json.loads(Path(pairs_path).read_text())]
    start = time.perf_counter()
    first = phase == "first"
    rows = _pgscan(first, uri, db, pairs) if mode == "pgscan" else _copy_pairs(mode, first, uri, db, pairs)
    inproc = time.perf_counter() - start - _IMPORT_S  # the driver's import is import_s, not copy time
    json.dump({"rows": rows, "inproc_s": inproc, "import_s": _BASE_IMPORT_S + _IMPORT_S}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
