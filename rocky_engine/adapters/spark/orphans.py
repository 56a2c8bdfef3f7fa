"""The directory a cancelled write leaves where a Parquet table was to be: found, and given back.

Measured on Spark 4.3.0 (tests/engine/run/test_spark_sigterm.py): a ``CREATE TABLE ... AS`` cancelled
mid-write registers no table but leaves its directory at the table's default location: the committer's
``_temporary``, sometimes part files of tasks still writing when the job was aborted, or, when the cancel
was lost (docs/adapters.md, "Interruption on Spark"), every file of a write that finished. Spark then
refuses any managed table of that name (``LOCATION_ALREADY_EXISTS``): a model interrupted once would fail
on every later run until someone deleted the directory on the server by hand.

Spark Connect has no file API, so the directory is given back through the catalog: a scratch managed
table is created, moved onto the directory (``ALTER TABLE ... SET LOCATION``) and dropped, and dropping a
managed table deletes its directory. Only the directory Spark named in its refusal is ever reclaimed, and
only when no table owns it (Spark checks the name before the location), so no table's data is touched.
The scratch table's own empty directory stays (an empty directory blocks nothing).

This runs only after a refusal: the statements of a normal build are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.spark.capabilities import extended_field
from rocky_engine.errors import AdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect

LOCATION_TAKEN = "LOCATION_ALREADY_EXISTS"


def execute_creating(
    session: WarehouseSession, statement: str, *, catalog: str, schema: str, name: str, scratch: str,
    dialect: Dialect,
) -> None:
    """Run ``statement``, which creates the managed table ``catalog.schema.name``; when an orphaned
    directory holds that table's location, reclaim it (through the table ``scratch`` of the same schema)
    and run the statement once more."""
    try:
        session.execute(statement)
        return
    except AdapterError as exc:
        if getattr(exc, "error_class", None) != LOCATION_TAKEN or not _reclaim(
            session, str(exc), catalog=catalog, schema=schema, name=name, scratch=scratch, dialect=dialect
        ):
            raise
    session.execute(statement)


def _reclaim(
    session: WarehouseSession, refusal: str, *, catalog: str, schema: str, name: str, scratch: str,
    dialect: Dialect,
) -> bool:
    """Delete the directory at ``name``'s default location; False (nothing deleted) when the refusal did
    not name that directory."""
    quote = dialect.quote
    ns = ".".join(quote(p) for p in (catalog, schema))
    table = f"{ns}.{quote(scratch)}"
    session.execute(f"DROP TABLE IF EXISTS {table}")
    session.execute(f"CREATE TABLE {table} (x INT) USING parquet")
    try:
        own = extended_field(session, table, "Location") or ""
        # A schema's managed tables sit side by side under its directory, named in lower case.
        orphan = f"{own.rsplit('/', 1)[0]}/{name.lower()}" if own else ""
        if not orphan or f"'{orphan}'" not in refusal:
            return False
        session.execute(f"ALTER TABLE {table} SET LOCATION {dialect.literal(orphan)}")
    finally:
        session.execute(f"DROP TABLE IF EXISTS {table}")  # a managed table: takes its directory with it
    return True
