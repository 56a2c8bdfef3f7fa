"""Materialization strategies on PostgreSQL, where views depend on tables and DDL is transactional.

PostgreSQL records view dependencies, so dropping a table that a view reads fails (``2BP01``). A full
refresh therefore drops and recreates the table when nothing depends on it, and otherwise replaces its
rows in place (``TRUNCATE`` + ``INSERT``) so the dependent views survive, all in one transaction; a column
change under a dependent view is refused with the names of the views.
Every multi-statement unit runs through ``atomically``: a lost connection rolls it back and the retrier
runs the whole unit again, which is safe because each unit is idempotent.
"""

from __future__ import annotations

from rocky_engine.adapters.base import WarehouseSession, quote_ident
from rocky_engine.errors import AdapterError
from rocky_engine.models.model import Strategy
from rocky_engine.run.compile import ResolvedTarget
from rocky_engine.run.materialize import Materialized, _merge, _target_columns, _watermark
from rocky_engine.run.retry import atomically

_DEPENDENT_OBJECTS = "2BP01"  # dependent_objects_still_exist
_VIEW_SHAPE_CHANGED = frozenset({"42P16", "42804"})  # CREATE OR REPLACE VIEW cannot drop/retype columns


def materialize_postgres(
    session: WarehouseSession,
    strategy: Strategy,
    target: ResolvedTarget,
    select: str,
    *,
    exists_as: str | None,
) -> Materialized:
    """Build ``target`` from ``select`` on PostgreSQL; ``exists_as`` is "table", "view" or None."""
    q = target.qualified
    kind = strategy.type
    if kind == "view":
        _view(session, q, select, exists_as)
        return Materialized(rows=None)
    if kind == "full_refresh" or exists_as != "table":
        rows = _replace_table(session, target, select, exists_as)
        return Materialized(rows=rows, watermark=_watermark(session, strategy, q))
    if kind == "incremental":
        ts = quote_ident(strategy.timestamp_column or "")
        cols = _target_columns(session, target)
        rows = session.execute(
            f"INSERT INTO {q} ({_list(cols)}) SELECT {_list(cols, 'src.')} FROM ({select}) AS src "
            f"WHERE (SELECT MAX({ts}) FROM {q}) IS NULL OR src.{ts} > (SELECT MAX({ts}) FROM {q})"
        )
        return Materialized(rows=rows, watermark=_watermark(session, strategy, q))
    if kind == "merge":
        return Materialized(rows=_merge(session, strategy, target, select))
    if kind == "delete_insert":
        return Materialized(rows=_delete_insert(session, strategy, target, select))
    raise ValueError(f"strategy {kind} is not materialized")


def _view(session: WarehouseSession, q: str, select: str, exists_as: str | None) -> None:
    if exists_as == "table":
        def swap() -> None:
            session.execute(f"DROP TABLE {q}")
            session.execute(f"CREATE VIEW {q} AS {select}")

        atomically(session, swap, f"replace table {q} by a view")
        return
    try:
        session.execute(f"CREATE OR REPLACE VIEW {q} AS {select}")
    except AdapterError as exc:
        if getattr(exc, "sqlstate", None) not in _VIEW_SHAPE_CHANGED:
            raise

        # Columns were removed, renamed or retyped: only a drop and create can do that.
        def rebuild() -> None:
            session.execute(f"DROP VIEW {q}")
            session.execute(f"CREATE VIEW {q} AS {select}")

        atomically(session, rebuild, f"rebuild view {q}")


def _replace_table(
    session: WarehouseSession, target: ResolvedTarget, select: str, exists_as: str | None
) -> int | None:
    q = target.qualified

    def build() -> int | None:
        if exists_as == "view":
            session.execute(f"DROP VIEW IF EXISTS {q}")
        try:
            with session.transaction():  # a savepoint: the drop may fail and the refresh go on
                session.execute(f"DROP TABLE IF EXISTS {q}")
        except AdapterError as exc:
            if getattr(exc, "sqlstate", None) != _DEPENDENT_OBJECTS:
                raise
            return _refresh_in_place(session, target, select)
        return session.execute(f"CREATE TABLE {q} AS {select}")

    return atomically(session, build, f"full refresh of {q}")


def _refresh_in_place(session: WarehouseSession, target: ResolvedTarget, select: str) -> int | None:
    """Views depend on the table: keep the table and replace its rows, if the columns did not change."""
    q = target.qualified
    stage_name = f"__rocky_fr_{target.table}"
    stage = quote_ident(stage_name)
    session.execute(f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS {select}")
    new_cols = _columns_of(session, f"pg_temp.{stage}")
    old_cols = _columns_of(session, q)
    if new_cols != old_cols:
        views = session.query(_DEPENDENT_VIEWS, [q])
        names = ", ".join(str(r[0]) for r in views) or "other objects"
        raise AdapterError(
            f"cannot change the columns of {target.full_name}: views depend on it ({names}) and PostgreSQL "
            f"cannot alter a table under a view (columns {_shape(old_cols)} -> {_shape(new_cols)})",
            failure_kind="query-rejected",
            hint="drop the dependent views and run again; views that are models of this pipeline are rebuilt",
        )
    session.execute(f"TRUNCATE {q}")
    return session.execute(f"INSERT INTO {q} SELECT * FROM {stage}")


_DEPENDENT_VIEWS = (
    "SELECT DISTINCT vn.nspname || '.' || v.relname FROM pg_depend d "
    "JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class "
    "JOIN pg_namespace vn ON vn.oid = v.relnamespace "
    "WHERE d.refobjid = to_regclass(?) AND v.oid <> d.refobjid ORDER BY 1"
)


def _columns_of(session: WarehouseSession, relation: str) -> list[tuple[str, str]]:
    rows = session.query(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(?) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [relation],
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def _shape(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in cols) + ")"


def _delete_insert(
    session: WarehouseSession, strategy: Strategy, target: ResolvedTarget, select: str
) -> int | None:
    q = target.qualified
    # IS NOT DISTINCT FROM, not IN: a NULL partition value must be replaced too, never duplicated.
    same_partition = " AND ".join(
        f"t.{quote_ident(p)} IS NOT DISTINCT FROM s.{quote_ident(p)}" for p in strategy.partition_by
    )
    stage = quote_ident(f"__rocky_di_{target.table}")
    cols = _target_columns(session, target)

    def swap() -> int | None:
        # ON COMMIT DROP: the stage never outlives the unit, even when a retry runs it again.
        session.execute(f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS {select}")
        session.execute(
            f"DELETE FROM {q} AS t WHERE EXISTS (SELECT 1 FROM {stage} AS s WHERE {same_partition})"
        )
        return session.execute(f"INSERT INTO {q} ({_list(cols)}) SELECT {_list(cols)} FROM {stage}")

    return atomically(session, swap, f"delete+insert into {q}")


def _list(columns: list[str] | tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{quote_ident(c)}" for c in columns)
