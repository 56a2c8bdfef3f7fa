"""Turn a compiled SELECT into the statements of its materialization strategy.

Full refresh is one ``CREATE OR REPLACE TABLE ... AS`` on DuckDB (DESIGN.md: one statement per model).
Incremental, merge and delete_insert fall back to a full build when the target does not exist yet.
PostgreSQL has its own module (``materialize_postgres``): view dependencies and transactional DDL.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.models.model import Strategy
from rocky_engine.run.compile import ResolvedTarget


@dataclass(frozen=True, slots=True)
class Materialized:
    rows: int | None
    watermark: str | None = None


def materialize(
    session: WarehouseSession,
    dialect: str,
    strategy: Strategy,
    target: ResolvedTarget,
    select: str,
    *,
    exists_as: str | None,
) -> Materialized:
    """Build ``target`` from ``select``; ``exists_as`` is "table", "view" or None (from one catalog read)."""
    if dialect == "postgres":
        # Imported here: it imports this module's helpers (and DuckDB runs never need it).
        from rocky_engine.run.materialize_postgres import materialize_postgres

        return materialize_postgres(session, strategy, target, select, exists_as=exists_as)
    q = target.qualified
    kind = strategy.type
    if kind == "view":
        if exists_as == "table":
            session.execute(f"DROP TABLE {q}")
        session.execute(f"CREATE OR REPLACE VIEW {q} AS {select}")
        return Materialized(rows=None)
    if exists_as == "view":
        session.execute(f"DROP VIEW {q}")
        exists_as = None
    if kind == "full_refresh" or exists_as is None:
        rows = _replace_table(session, dialect, q, select)
        return Materialized(rows=rows, watermark=_watermark(session, strategy, q))
    if kind == "incremental":
        ts = quote_ident(strategy.timestamp_column or "")
        rows = session.execute(
            f"INSERT INTO {q} {_by_name(dialect, session, target)}SELECT * FROM ({select}) AS src "
            f"WHERE (SELECT MAX({ts}) FROM {q}) IS NULL OR src.{ts} > (SELECT MAX({ts}) FROM {q})"
        )
        return Materialized(rows=rows, watermark=_watermark(session, strategy, q))
    if kind == "merge":
        return Materialized(rows=_merge(session, strategy, target, select))
    if kind == "delete_insert":
        return Materialized(rows=_delete_insert(session, dialect, strategy, target, select))
    raise ValueError(f"strategy {kind} is not materialized")


def _replace_table(session: WarehouseSession, dialect: str, q: str, select: str) -> int | None:
    if dialect == "duckdb":
        return session.execute(f"CREATE OR REPLACE TABLE {q} AS {select}")
    with session.transaction():
        session.execute(f"DROP TABLE IF EXISTS {q}")
        return session.execute(f"CREATE TABLE {q} AS {select}")


def _watermark(session: WarehouseSession, strategy: Strategy, q: str) -> str | None:
    if strategy.type != "incremental" or not strategy.timestamp_column:
        return None
    row = session.query(f"SELECT MAX({quote_ident(strategy.timestamp_column)}) FROM {q}")
    value = row[0][0] if row else None
    return None if value is None else _iso(value)


def _iso(value: object) -> str:
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)


def _target_columns(session: WarehouseSession, target: ResolvedTarget) -> list[str]:
    rows = session.query(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? AND table_schema = ? "
        "AND table_name = ? ORDER BY ordinal_position",
        [target.catalog, target.schema, target.table],
    )
    return [str(r[0]) for r in rows]


def _by_name(dialect: str, session: WarehouseSession, target: ResolvedTarget) -> str:
    if dialect == "duckdb":
        return "BY NAME "
    cols = ", ".join(quote_ident(c) for c in _target_columns(session, target))
    return f"({cols}) "


def _merge(session: WarehouseSession, strategy: Strategy, target: ResolvedTarget, select: str) -> int | None:
    columns = _target_columns(session, target)
    keys = list(strategy.unique_key)
    update = list(strategy.update_columns) or [c for c in columns if c not in keys]
    on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in keys)
    sets = ", ".join(f"{quote_ident(c)} = s.{quote_ident(c)}" for c in update)
    cols = ", ".join(quote_ident(c) for c in columns)
    vals = ", ".join(f"s.{quote_ident(c)}" for c in columns)
    matched = f" WHEN MATCHED THEN UPDATE SET {sets}" if sets else ""
    return session.execute(
        f"MERGE INTO {target.qualified} AS t USING ({select}) AS s ON {on}{matched} "
        f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({vals})"
    )


def _delete_insert(
    session: WarehouseSession, dialect: str, strategy: Strategy, target: ResolvedTarget, select: str
) -> int | None:
    # IS NOT DISTINCT FROM, not IN: a NULL partition value must be replaced too, never duplicated.
    same_partition = " AND ".join(
        f"t.{quote_ident(p)} IS NOT DISTINCT FROM s.{quote_ident(p)}" for p in strategy.partition_by
    )
    stage = quote_ident(f"__rocky_di_{target.table}")
    with session.transaction():
        session.execute(f"CREATE TEMP TABLE {stage} AS {select}")
        session.execute(
            f"DELETE FROM {target.qualified} AS t "
            f"WHERE EXISTS (SELECT 1 FROM {stage} AS s WHERE {same_partition})"
        )
        rows = session.execute(f"INSERT INTO {target.qualified} {_by_name(dialect, session, target)}"
                               f"SELECT * FROM {stage}")
        session.execute(f"DROP TABLE {stage}")
    return rows
