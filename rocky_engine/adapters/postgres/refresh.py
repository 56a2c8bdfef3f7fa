"""Replacing a table or a view on PostgreSQL, where views pin the relations they read.

PostgreSQL records view dependencies, so dropping a table that a view reads fails (``2BP01``). A full
refresh therefore drops and recreates the table when nothing depends on it, and otherwise replaces its
rows in place (``TRUNCATE`` + ``INSERT``) so the dependent views survive, all in one transaction; a column
change under a dependent view is refused with the names of the views. ``CREATE OR REPLACE VIEW`` cannot
drop or retype a column, so such a view is dropped and created in one transaction.
Every unit runs through ``atomically``: a lost connection rolls it back and the retrier runs the whole
unit again, which is safe because each unit is idempotent.
"""

from __future__ import annotations

from rocky_engine.adapters.base import TableName, WarehouseSession, quote_ident
from rocky_engine.adapters.retry import atomically
from rocky_engine.errors import AdapterError

_DEPENDENT_OBJECTS = "2BP01"  # dependent_objects_still_exist
_VIEW_SHAPE_CHANGED = frozenset({"42P16", "42804"})  # CREATE OR REPLACE VIEW cannot drop/retype columns

_DEPENDENT_VIEWS = (
    "SELECT DISTINCT vn.nspname || '.' || v.relname FROM pg_depend d "
    "JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class "
    "JOIN pg_namespace vn ON vn.oid = v.relnamespace "
    "WHERE d.refobjid = to_regclass(?) AND v.oid <> d.refobjid ORDER BY 1"
)


def replace_view(session: WarehouseSession, table: TableName, select: str) -> None:
    """``CREATE OR REPLACE VIEW``, or a drop and create when the view's columns changed."""
    q = table.qualified
    try:
        session.execute(f"CREATE OR REPLACE VIEW {q} AS {select}")
    except AdapterError as exc:
        if _sqlstate(exc) not in _VIEW_SHAPE_CHANGED:
            raise

        # Columns were removed, renamed or retyped: only a drop and create can do that.
        def rebuild() -> None:
            session.execute(f"DROP VIEW {q}")
            session.execute(f"CREATE VIEW {q} AS {select}")

        atomically(session, rebuild, f"rebuild view {q}")


def replace_table(
    session: WarehouseSession, table: TableName, select: str, exists_as: str | None
) -> int | None:
    """Make ``table`` a table of ``select`` in one transaction, keeping the views that depend on it."""
    q = table.qualified

    def build() -> int | None:
        if exists_as == "view":
            session.execute(f"DROP VIEW IF EXISTS {q}")
        try:
            with session.transaction():  # a savepoint: the drop may fail and the refresh go on
                session.execute(f"DROP TABLE IF EXISTS {q}")
        except AdapterError as exc:
            if _sqlstate(exc) != _DEPENDENT_OBJECTS:
                raise
            return _refresh_in_place(session, table, select)
        return session.execute(f"CREATE TABLE {q} AS {select}")

    return atomically(session, build, f"full refresh of {q}")


def _refresh_in_place(session: WarehouseSession, table: TableName, select: str) -> int | None:
    """Views depend on the table: keep the table and replace its rows, if the columns did not change."""
    q = table.qualified
    stage = quote_ident(f"__rocky_fr_{table.table}")
    session.execute(f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS {select}")
    new_cols = _columns_of(session, f"pg_temp.{stage}")
    old_cols = _columns_of(session, q)
    if new_cols != old_cols:
        views = session.query(_DEPENDENT_VIEWS, [q])
        names = ", ".join(str(r[0]) for r in views) or "other objects"
        raise AdapterError(
            f"cannot change the columns of {table.full_name}: views depend on it ({names}) and PostgreSQL "
            f"cannot alter a table under a view (columns {_shape(old_cols)} -> {_shape(new_cols)})",
            failure_kind="query-rejected",
            hint="drop the dependent views and run again; views that are models of this pipeline are rebuilt",
        )
    session.execute(f"TRUNCATE {q}")
    return session.execute(f"INSERT INTO {q} SELECT * FROM {stage}")


def _columns_of(session: WarehouseSession, relation: str) -> list[tuple[str, str]]:
    rows = session.query(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(?) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [relation],
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def _shape(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in cols) + ")"


def _sqlstate(exc: AdapterError) -> str | None:
    from rocky_engine.adapters.postgres.connection import PostgresAdapterError

    return exc.sqlstate if isinstance(exc, PostgresAdapterError) else None
