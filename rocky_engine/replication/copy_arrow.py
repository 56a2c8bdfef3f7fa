"""Copy one table between two warehouses (PostgreSQL -> DuckDB, DuckDB -> PostgreSQL, two DuckDB files).

Rows stream in Arrow record batches, never row by row through Python inserts:

1. read the source with one SELECT (incremental: ``WHERE ts > <lower bound>``, the bound being the
   larger of the stored watermark and the target's ``MAX(ts)``) as an Arrow batch reader: DuckDB's own
   Arrow export, or PostgreSQL rows fetched in batches from a server-side cursor into typed Arrow arrays;
2. land the batches in a temporary stage table on the target: DuckDB scans the registered reader,
   PostgreSQL receives ``COPY stage FROM STDIN (FORMAT csv)`` fed by pyarrow's CSV writer;
3. apply the same statements as a same-warehouse copy, reading from the stage, in one target
   transaction (so a failure leaves the target as it was), then drop the stage.

Types that have no twin on the other side travel as text (see ``sql_types``); a created target gets the
DDL types of ``sql_types.target_type``, so the next run's drift check compares like with like.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.errors import AdapterError
from rocky_engine.replication.copy_sql import (
    CopyResult,
    CopySpec,
    alter_statements,
    insert_columns,
    merge_statements,
    read_watermark,
    select_list,
)
from rocky_engine.replication.sql_types import SqlType, parse_type

BATCH_ROWS = 50_000
_stage_ids = itertools.count(1)


def copy_across(source: WarehouseSession, target: WarehouseSession, spec: CopySpec) -> CopyResult:
    """Copy one table from ``source`` into ``target`` (different warehouses)."""
    full = spec.full
    since: Any = None
    ts = quote_ident(spec.ts) if spec.ts else None
    if not full and spec.ts is not None and spec.watermark is not None:
        if spec.strategy == "incremental":
            rows = target.query(
                f"SELECT GREATEST(CAST(? AS {spec.target_types[spec.ts]}), MAX({ts})) "
                f"FROM {spec.target_rel}",
                [spec.watermark],
            )
            since = rows[0][0] if rows else spec.watermark
        elif spec.strategy == "merge":
            since = spec.watermark
    exprs = ", ".join(_source_expr(c.name, c.data_type, spec) for c in spec.columns)
    sql = f"SELECT {exprs} FROM {spec.source_rel}"
    params: list[Any] = []
    if since is not None:
        sql += f" WHERE {ts} > CAST(? AS {spec.ts_type})"
        params = [since]
    stage = f"__rocky_stage_{next(_stage_ids)}"
    try:
        with _reader(source, spec, sql, params) as reader:
            _load_stage(target, spec, stage, reader)
    except AdapterError:
        raise
    except Exception as exc:  # driver errors of the Arrow / COPY path, which bypass the adapters
        raise _driver_error(exc) from exc
    try:
        rows_copied = _apply(target, spec, quote_ident(stage))
    finally:
        try:
            target.execute(f"DROP TABLE IF EXISTS {quote_ident(stage)}")
        except AdapterError:
            pass  # a temporary table dies with its session anyway
    return CopyResult(rows=rows_copied, watermark=read_watermark(target, spec), full=full)


def _apply(target: WarehouseSession, spec: CopySpec, stage: str) -> int | None:
    casts = {c.name: spec.target_types[c.name] for c in spec.columns}
    select = f"SELECT {select_list(spec, casts)} FROM {stage}"
    with target.transaction():
        if spec.full:
            ddl = ", ".join(
                [f"{quote_ident(c.name)} {casts[c.name]}" for c in spec.columns]
                + [f"{quote_ident(m.name)} {m.type}" for m in spec.metadata]
            )
            target.execute(f"DROP TABLE IF EXISTS {spec.target_rel}")
            target.execute(f"CREATE TABLE {spec.target_rel} ({ddl})")
            return target.execute(f"INSERT INTO {spec.target_rel} ({insert_columns(spec)}) {select}")
        for stmt in alter_statements(spec):
            target.execute(stmt)
        if spec.strategy == "merge":
            typed = f"(SELECT {', '.join(_casted(c.name, casts) for c in spec.columns)} FROM {stage})"
            delete, insert = merge_statements(spec, typed, None)
            target.execute(delete)
            return target.execute(insert)
        return target.execute(f"INSERT INTO {spec.target_rel} ({insert_columns(spec)}) {select}")


def _casted(name: str, casts: dict[str, str]) -> str:
    return f"CAST({quote_ident(name)} AS {casts[name]}) AS {quote_ident(name)}"


# --------------------------------------------------------------------------- reading the source


def _source_expr(name: str, data_type: str, spec: CopySpec) -> str:
    """The SELECT item of one source column, cast where the value cannot travel as itself."""
    col = quote_ident(name)
    t = parse_type(data_type)
    if spec.source_dialect == "postgres":
        if t.family in ("uuid", "json", "interval", "other"):
            return f"CAST({col} AS text) AS {col}"
        if t.family == "decimal" and (t.size is None or t.size > 38):
            return f"CAST({col} AS double precision) AS {col}"
        return col
    if spec.target_dialect == "postgres":
        if t.family in ("uuid", "json", "interval", "other"):
            return f"CAST({col} AS VARCHAR) AS {col}"
        if t.family == "int" and (t.size or 0) > 64:
            return f"CAST({col} AS DECIMAL(38,0)) AS {col}"
        if t.family == "blob":
            # bytea's text input form, so the CSV carries it intact
            return f"CASE WHEN {col} IS NULL THEN NULL ELSE '\\x' || lower(hex({col})) END AS {col}"
    return col


@contextmanager
def _reader(session: WarehouseSession, spec: CopySpec, sql: str, params: list[Any]) -> Iterator[Any]:
    import pyarrow as pa

    raw = _raw(session)
    if spec.source_dialect == "duckdb":
        rel = raw._cur.sql(sql, params=params or None)
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.record_batch
        yield to_reader(BATCH_ROWS)
        return
    conn = raw._connection()
    schema = pa.schema([(c.name, _arrow_type(parse_type(c.data_type))) for c in spec.columns])
    with conn.transaction(), conn.cursor(name=f"rocky_copy_{next(_stage_ids)}") as cur:
        from rocky_engine.adapters.postgres_adapter import _pyformat

        cur.execute(_pyformat(sql), params or None)

        def batches() -> Iterator[Any]:
            while True:
                rows = cur.fetchmany(BATCH_ROWS)
                if not rows:
                    return
                columns = list(zip(*rows, strict=True))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)],
                    schema=schema,
                )

        yield pa.RecordBatchReader.from_batches(schema, batches())


def _arrow_type(t: SqlType) -> Any:
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


# --------------------------------------------------------------------------- landing in the target


def _load_stage(target: WarehouseSession, spec: CopySpec, stage: str, reader: Any) -> None:
    raw = _raw(target)
    if spec.target_dialect == "duckdb":
        cur = raw._cur
        view = f"{stage}_src"
        cur.register(view, reader)
        try:
            cur.execute(f"CREATE TEMP TABLE {quote_ident(stage)} AS SELECT * FROM {quote_ident(view)}")
        finally:
            cur.unregister(view)
        return
    import pyarrow.csv as pacsv

    conn = raw._connection()
    cols = ", ".join(f"{quote_ident(c.name)} {spec.target_types[c.name]}" for c in spec.columns)
    names = ", ".join(quote_ident(c.name) for c in spec.columns)
    conn.execute(f"CREATE TEMP TABLE {quote_ident(stage)} ({cols})")
    options = pacsv.WriteOptions(include_header=False)
    statement = f"COPY {quote_ident(stage)} ({names}) FROM STDIN (FORMAT csv)"
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for batch in reader:
            buf = io.BytesIO()
            pacsv.write_csv(batch, buf, options)
            copy.write(buf.getvalue())


def _driver_error(exc: Exception) -> AdapterError:
    from rocky_engine.adapters.failure import classify, first_line

    text = first_line(str(exc)) or type(exc).__name__
    return AdapterError(text, failure_kind=classify(exc))


def _raw(session: WarehouseSession) -> Any:
    """The driver session under the retry wrapper (cross-warehouse copies need the driver's Arrow/COPY)."""
    inner: Any = session
    while hasattr(inner, "inner"):
        inner = inner.inner
    return inner
