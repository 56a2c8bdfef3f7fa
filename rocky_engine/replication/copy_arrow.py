"""Copy one table between two warehouses (PostgreSQL -> DuckDB, DuckDB -> PostgreSQL, two DuckDB files).

Rows stream in Arrow record batches, never row by row through Python inserts, over the adapters' copy
seam (``WarehouseSession.read_arrow`` / ``read_arrow_ranges`` / ``scan_arrow``):

1. read the source with one SELECT (incremental: ``WHERE ts > <lower bound>``, the bound being the
   larger of the stored watermark and the target's ``MAX(ts)``) as an Arrow batch reader, or as several
   range reads of it read concurrently (``replication.ranges``: ``[source] parallel_reads``);
2. hand the readers to the target as one relation (``scan_arrow``): DuckDB scans the streams inside the
   statement that writes the target, so every row is written once; a merge (which reads the arriving
   rows twice) and a PostgreSQL target land them in a temporary stage table first;
3. apply the same statements as a same-warehouse copy, reading from that relation, in one target
   transaction (so a failure, a crash mid-copy included, leaves the target as it was), then drop any
   stage. The watermark is read from the target after the commit.

Each column travels as ``adapters.dialect.copy_item`` decides from the two dialects (the source casts in
its SELECT what the target's loader or the source's reader cannot carry as is). A created target gets the
DDL types of ``column_type_from``, so the next run's drift check compares like with like.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack
from typing import Any

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.dialect import Dialect, copy_item
from rocky_engine.errors import AdapterError
from rocky_engine.replication.copy_sql import (
    CopyResult,
    CopySpec,
    apply_drift,
    insert_columns,
    merge_rows,
    merge_statements,
    read_watermark,
    select_list,
)
from rocky_engine.replication.ranges import range_statements

_stage_ids = itertools.count(1)


def copy_across(source: WarehouseSession, target: WarehouseSession, spec: CopySpec) -> CopyResult:
    """Copy one table from ``source`` into ``target`` (different warehouses)."""
    assert spec.source_dialect is not None, "a cross-warehouse copy needs the source's dialect"
    full = spec.full
    since: Any = None
    if not full and spec.ts is not None and spec.watermark is not None:
        if spec.strategy == "incremental":
            mark = spec.dialect.quote(spec.ts)
            rows = target.query(
                f"SELECT GREATEST(CAST(? AS {spec.target_types[spec.ts]}), MAX({mark})) "
                f"FROM {spec.target_rel}",
                [spec.watermark],
            )
            since = rows[0][0] if rows else spec.watermark
        elif spec.strategy == "merge":
            since = spec.watermark
    items = [copy_item(c.name, c.data_type, spec.source_dialect, spec.dialect) for c in spec.columns]
    sql = f"SELECT {', '.join(item for item, _ in items)} FROM {spec.source_rel}"
    params: list[Any] = []
    if since is not None:
        sql += f" WHERE {spec.source_dialect.quote(spec.ts or '')} > CAST(? AS {spec.ts_type})"
        params = [since]
    stage = f"__rocky_stage_{next(_stage_ids)}"
    arrow_columns = [(c.name, wire) for c, (_, wire) in zip(spec.columns, items, strict=True)]
    stage_columns = [(c.name, spec.target_types[c.name]) for c in spec.columns]
    # A merge reads the arriving rows twice (delete, then insert): only it needs a stage on DuckDB.
    once = full or spec.strategy != "merge"
    try:
        with ExitStack() as stack:
            statements = _statements(source, spec, sql, params, has_where=since is not None)
            if len(statements) == 1:
                readers = [stack.enter_context(source.read_arrow(sql, params, arrow_columns))]
            else:
                readers = stack.enter_context(source.read_arrow_ranges(statements, arrow_columns))
            relation = stack.enter_context(target.scan_arrow(stage, stage_columns, readers, once=once))
            rows_copied = _apply(target, spec, relation)
            if rows_copied is None and spec.strategy != "merge":
                # A warehouse that reports no row counts (Spark): every arriving row was written.
                counted = target.query(f"SELECT count(*) FROM {relation}")
                rows_copied = int(counted[0][0]) if counted else None
    except AdapterError:
        raise
    except Exception as exc:  # a driver error raised while one side consumed the other's stream
        raise _driver_error(exc) from exc
    return CopyResult(rows=rows_copied, watermark=read_watermark(target, spec), full=full)


def _statements(
    source: WarehouseSession, spec: CopySpec, sql: str, params: list[Any], *, has_where: bool
) -> list[tuple[str, list[Any]]]:
    """The source SELECT as parallel range reads when the spec asks for more than one and has a key."""
    key = spec.split_key
    if spec.parallel_reads <= 1 or key is None:
        return [(sql, params)]
    assert spec.source_dialect is not None
    key_type = next(c.data_type for c in spec.columns if c.name == key)
    return range_statements(source, spec.source_dialect, sql, params, has_where=has_where, key=key,
                            key_type=key_type, reads=spec.parallel_reads)


def _apply(target: WarehouseSession, spec: CopySpec, stage: str) -> int | None:
    casts = {c.name: spec.target_types[c.name] for c in spec.columns}
    select = f"SELECT {select_list(spec, casts)} FROM {stage}"
    if not spec.dialect.capabilities.transactional_ddl:
        return _apply_untransacted(target, spec, stage, select, casts)
    with target.transaction():
        if spec.full:
            spec.dialect.drop_table(target, spec.target_rel)
            spec.dialect.create_table(
                target, spec.target_rel,
                [(c.name, casts[c.name]) for c in spec.columns] + [(m.name, m.type) for m in spec.metadata],
            )
            return target.execute(f"INSERT INTO {spec.target_rel} ({insert_columns(spec)}) {select}")
        apply_drift(target, spec)
        if spec.strategy == "merge":
            items = ", ".join(_casted(spec.dialect, c.name, casts) for c in spec.columns)
            typed = f"(SELECT {items} FROM {stage})"
            delete, insert = merge_statements(spec, typed, None)
            target.execute(delete)
            return target.execute(insert)
        return target.execute(f"INSERT INTO {spec.target_rel} ({insert_columns(spec)}) {select}")


def _apply_untransacted(
    target: WarehouseSession, spec: CopySpec, stage: str, select: str, casts: dict[str, str]
) -> int | None:
    """The same writes on a warehouse whose DDL cannot be rolled back (Spark), one statement each.

    No transaction can hide a drop and a create, so a full copy (a drift rebuild included: new column
    types) is the dialect's replace (``create_or_replace_as_select``: on Spark CTAS for a new table, and
    for an existing one ``CREATE OR REPLACE`` where the format has it, else a stage table swapped in by
    renames), which never shows a half-written table under the target's name. An append is one
    ``INSERT`` after the drift ``ALTER``s (an added column survives a failed insert harmlessly: NULLs, and
    the next run sees it there). A merge is the dialect's one upsert of the newest arriving row per key
    (``Dialect.merge``: ``MERGE INTO`` where the format has it; on Spark Parquet a rewrite of the whole
    table through a stage, keeping the rows whose key does not arrive).
    """
    dialect = spec.dialect
    if spec.full:
        exists_as = "table" if spec.target_exists else None
        return dialect.create_or_replace_as_select(target, spec.target, select, exists_as=exists_as)
    apply_drift(target, spec)
    if spec.strategy == "merge":
        items = ", ".join(_casted(dialect, c.name, casts) for c in spec.columns)
        rows = merge_rows(spec, f"(SELECT {items} FROM {stage})", None)
        return dialect.merge(target, spec.target, rows, spec.merge_keys)
    return target.execute(f"INSERT INTO {spec.target_rel} ({insert_columns(spec)}) {select}")


def _casted(dialect: Dialect, name: str, casts: dict[str, str]) -> str:
    return f"CAST({dialect.quote(name)} AS {casts[name]}) AS {dialect.quote(name)}"


def _driver_error(exc: Exception) -> AdapterError:
    from rocky_engine.adapters.failure import classify, first_line

    text = first_line(str(exc)) or type(exc).__name__
    return AdapterError(text, failure_kind=classify(exc))
