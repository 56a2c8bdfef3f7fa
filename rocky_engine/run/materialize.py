"""Turn a compiled SELECT into the statements of its materialization strategy.

Which statements a strategy takes is the strategy's business (here); how each is spelled, and how many
statements it takes on a given warehouse, is the dialect's (``adapters.dialect``). On DuckDB a full
refresh is one ``CREATE OR REPLACE TABLE ... AS`` (DESIGN.md: one statement per model). Incremental,
merge and delete_insert fall back to a full build when the target does not exist as a table yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocky_engine.adapters.base import TableName, WarehouseSession
from rocky_engine.adapters.dialect import Dialect
from rocky_engine.models.model import Strategy


@dataclass(frozen=True, slots=True)
class Materialized:
    rows: int | None
    watermark: str | None = None
    #: rows in the target after the write, when counted (``run.events``)
    row_count: int | None = None


def materialize(
    session: WarehouseSession,
    dialect: Dialect,
    strategy: Strategy,
    target: TableName,
    select: str,
    *,
    exists_as: str | None,
) -> Materialized:
    """Build ``target`` from ``select``; ``exists_as`` is "table", "view" or None (from one catalog read)."""
    kind = strategy.type
    if kind == "view":
        dialect.create_or_replace_view(session, target, select, exists_as=exists_as)
        return Materialized(rows=None)
    if kind == "delete_insert" and exists_as != "table":
        rows = dialect.create_partitioned_as_select(session, target, select, strategy.partition_by,
                                                    exists_as=exists_as)
        return Materialized(rows=rows)
    if kind == "full_refresh" or exists_as != "table":
        rows = dialect.create_or_replace_as_select(session, target, select, exists_as=exists_as)
        return Materialized(rows=rows, watermark=_watermark(session, dialect, strategy, target))
    if kind == "incremental":
        ts = dialect.quote(strategy.timestamp_column or "")
        q = target.qualified
        rows = dialect.insert_select(
            session, target,
            f"SELECT * FROM ({select}) AS src "
            f"WHERE (SELECT MAX({ts}) FROM {q}) IS NULL OR src.{ts} > (SELECT MAX({ts}) FROM {q})",
        )
        return Materialized(rows=rows, watermark=_watermark(session, dialect, strategy, target))
    if kind == "merge":
        return Materialized(rows=dialect.merge(session, target, select, strategy.unique_key,
                                               strategy.update_columns))
    if kind == "delete_insert":
        return Materialized(rows=dialect.delete_insert(session, target, select, strategy.partition_by))
    raise ValueError(f"strategy {kind} is not materialized")


def _watermark(
    session: WarehouseSession, dialect: Dialect, strategy: Strategy, target: TableName
) -> str | None:
    if strategy.type != "incremental" or not strategy.timestamp_column:
        return None
    return dialect.read_watermark(session, target.qualified, strategy.timestamp_column)
