"""Copy one table between two warehouses (PostgreSQL -> DuckDB, DuckDB -> PostgreSQL, two DuckDB files).

Rows stream in Arrow record batches, never row by row through Python inserts, over the adapters' copy
seam (``WarehouseSession.read_arrow`` / ``write_arrow``):

1. read the source with one SELECT (incremental: ``WHERE ts > <lower bound>``, the bound being the
   larger of the stored watermark and the target's ``MAX(ts)``) as an Arrow batch reader;
2. land the batches in a temporary stage table on the target;
3. apply the same statements as a same-warehouse copy, reading from the stage, in one target
   transaction (so a failure leaves the target as it was), then drop the stage.

Each column travels as ``adapters.dialect.copy_item`` decides from the two dialects (the source casts in
its SELECT what the target's loader or the source's reader cannot carry as is). A created target gets the
DDL types of ``column_type_from``, so the next run's drift check compares like with like.
"""

from __future__ import annotations

import itertools
from typing import Any

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.dialect import Dialect, copy_item
from rocky_engine.errors import AdapterError
from rocky_engine.replication.copy_sql import (
    CopyResult,
    CopySpec,
    apply_drift,
    insert_columns,
    merge_statements,
    read_watermark,
    select_list,
)

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
    try:
        with source.read_arrow(sql, params, arrow_columns) as reader:
            target.write_arrow(stage, [(c.name, spec.target_types[c.name]) for c in spec.columns], reader)
    except AdapterError:
        raise
    except Exception as exc:  # a driver error raised while one side consumed the other's stream
        raise _driver_error(exc) from exc
    try:
        rows_copied = _apply(target, spec, spec.dialect.quote(stage))
    finally:
        try:
            spec.dialect.drop_table(target, spec.dialect.quote(stage))
        except AdapterError:
            pass  # a temporary table dies with its session anyway
    return CopyResult(rows=rows_copied, watermark=read_watermark(target, spec), full=full)


def _apply(target: WarehouseSession, spec: CopySpec, stage: str) -> int | None:
    casts = {c.name: spec.target_types[c.name] for c in spec.columns}
    select = f"SELECT {select_list(spec, casts)} FROM {stage}"
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


def _casted(dialect: Dialect, name: str, casts: dict[str, str]) -> str:
    return f"CAST({dialect.quote(name)} AS {casts[name]}) AS {dialect.quote(name)}"


def _driver_error(exc: Exception) -> AdapterError:
    from rocky_engine.adapters.failure import classify, first_line

    text = first_line(str(exc)) or type(exc).__name__
    return AdapterError(text, failure_kind=classify(exc))
