"""What a Spark server can do, read without side effects: table format, MERGE, stale reads across sessions.

Measured on Spark 4.3.0's built-in Parquet tables (no Delta Lake or Iceberg offline): ``MERGE INTO``,
``UPDATE``, ``DELETE``, ``CREATE OR REPLACE TABLE``, ``REPLACE TABLE``, ``INSERT ... REPLACE WHERE``,
``RENAME COLUMN`` and ``DROP COLUMN`` fail with ``UNSUPPORTED_FEATURE.TABLE_OPERATION`` (SQLSTATE 0A000);
a column type change fails with ``NOT_SUPPORTED_CHANGE_COLUMN``.

- ``probe`` reads the format new tables get (``spark.sql.sources.default``: parquet here, delta on
  Databricks) and infers MERGE from it; no statement touches a table.
- ``merge_supported`` asks the server about one existing table: ``EXPLAIN MERGE INTO t ... ON false``
  plans the statement and reports an unsupported operation in the plan text (as a row, not an error),
  without running anything.
- ``table_format`` reads one table's provider from ``DESCRIBE TABLE EXTENDED``.

Stale reads: every session caches the file listing of the file-source tables it read (up to
``spark.sql.filesourceTableRelationCacheSize`` tables, 1000 by default, a static conf). A session that
read a Parquet table before another session appended to it keeps answering from the old files (measured:
10 rows instead of 15, no error); one whose files were replaced fails with
``FAILED_READ_FILE.FILE_NOT_EXIST``. Delta and Iceberg resolve their snapshot per query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocky_engine.adapters.spark.errors import SparkAdapterError

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseSession
    from rocky_engine.adapters.spark.session import SparkConnectSession

#: table formats whose tables take MERGE INTO / UPDATE / DELETE and atomic CREATE OR REPLACE TABLE
TRANSACTIONAL_FORMATS = frozenset({"delta", "iceberg", "hudi"})
_UNSUPPORTED = "UNSUPPORTED_FEATURE.TABLE_OPERATION"
_PLANNING_ERROR = "Error occurred during query planning"


@dataclass(frozen=True, slots=True)
class SparkCapabilities:
    """The capability level of a Spark endpoint, as far as it can be read without writing."""

    spark_version: str
    catalog: str
    #: the format of a table created without ``USING`` (``spark.sql.sources.default``), lower case
    table_format: str
    #: MERGE INTO / UPDATE / DELETE on tables of ``table_format``
    merge: bool
    #: ``spark.sql.filesourceTableRelationCacheSize``; None when the server does not say
    relation_cache_size: int | None

    @property
    def atomic_replace(self) -> bool:
        """``CREATE OR REPLACE TABLE ... AS`` swaps the table in one commit (readers never see it empty)."""
        return self.table_format in TRANSACTIONAL_FORMATS

    @property
    def stale_reads(self) -> bool:
        """A session may read an old file listing of a table another session wrote (see module doc)."""
        if self.table_format in TRANSACTIONAL_FORMATS:
            return False
        return self.relation_cache_size is None or self.relation_cache_size > 0


def probe(session: SparkConnectSession) -> SparkCapabilities:
    """Read the capability level (three round trips, no table touched)."""
    rows = session.query("SELECT version(), current_catalog()")
    version, catalog = (str(v) for v in rows[0])
    table_format = (_conf(session, "spark.sql.sources.default") or "parquet").lower()
    cache = _conf(session, "spark.sql.filesourceTableRelationCacheSize")
    return SparkCapabilities(
        spark_version=version.split()[0],
        catalog=catalog,
        table_format=table_format,
        merge=table_format in TRANSACTIONAL_FORMATS,
        relation_cache_size=int(cache) if cache is not None and cache.isdigit() else None,
    )


def _conf(session: SparkConnectSession, key: str) -> str | None:
    """A conf's effective value (its default included); None when the server will not say."""
    try:
        value = session.run(lambda spark: spark.conf.get(key))
    except SparkAdapterError as exc:
        if exc.failure_kind in ("connection-failed", "auth-failed"):
            raise
        return None  # a managed service may hide a conf: the probe then assumes the worst
    return str(value) if value is not None else None


def merge_supported(session: SparkConnectSession, qualified: str) -> bool:
    """Whether the existing table ``qualified`` (already quoted) takes MERGE INTO; plans, never runs.

    Raises:
        SparkAdapterError: the table cannot be planned against (not-found when it does not exist).
    """
    rows = session.query(
        f"EXPLAIN MERGE INTO {qualified} USING (SELECT 1 AS rocky_probe) AS rocky_probe_src ON false "
        "WHEN MATCHED THEN DELETE"
    )
    text = "\n".join(str(r[0]) for r in rows)
    if _PLANNING_ERROR not in text:
        return True
    if _UNSUPPORTED in text:
        return False
    detail = next((line.strip() for line in text.splitlines()[1:] if line.strip()), text.strip())
    missing = "TABLE_OR_VIEW_NOT_FOUND" in text or "SCHEMA_NOT_FOUND" in text
    kind = "not-found" if missing else "query-rejected"
    raise SparkAdapterError(detail, failure_kind=kind, error_class=_condition(detail))


def table_format(session: SparkConnectSession, qualified: str) -> str:
    """The provider of the existing table ``qualified`` (``parquet``, ``delta``...), lower case.

    Raises:
        SparkAdapterError: not-found when the table does not exist.
    """
    rows = session.query(f"DESCRIBE TABLE EXTENDED {qualified}")
    provider = _field(rows, "Provider")
    if provider is not None:
        return provider.lower()
    return "view" if _field(rows, "View Text") is not None else "unknown"


def extended_field(session: WarehouseSession, qualified: str, name: str) -> str | None:
    """One field of ``DESCRIBE TABLE EXTENDED qualified`` (``Location``, ``Provider``...); None if absent."""
    return _field(session.query(f"DESCRIBE TABLE EXTENDED {qualified}"), name)


def _field(rows: list[tuple[Any, ...]], name: str) -> str | None:
    for row in rows:
        if str(row[0]).strip() == name:
            return str(row[1]).strip()
    return None


def _condition(text: str) -> str | None:
    if text.startswith("[") and "]" in text:
        return text[1 : text.index("]")]
    return None
