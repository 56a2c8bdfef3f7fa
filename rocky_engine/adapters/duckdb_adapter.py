"""DuckDB, the embedded warehouse: one connection per run, one cursor per worker thread.

DuckDB does not parallelise small statements internally, so concurrency comes from several cursors of one
connection, each running its own statement (DESIGN.md "Performance"). The catalog name is the file stem of
``path`` (``poc.duckdb`` is catalog ``poc``), or ``memory`` for an in-memory database.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from rocky_engine.adapters.base import Column, Maintenance, Relation, quote_ident
from rocky_engine.adapters.failure import classify, first_line
from rocky_engine.errors import AdapterError
from rocky_engine.logs import get_logger

log = get_logger("adapter.duckdb")

#: WAL size at which a concurrent run pauses to checkpoint (see ``WalCheckpoint``)
WAL_CHECKPOINT_BYTES = 256 * 1024 * 1024

_LOCK_PID = re.compile(r"PID (\d+)")


class DuckDbSession:
    """One cursor of the shared connection."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cur = cursor

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        try:
            self._cur.execute(sql, params)
            try:
                row = self._cur.fetchone()
            except duckdb.Error:
                return None
        except duckdb.Error as exc:
            raise _to_adapter_error(exc) from exc
        if row is not None and len(row) == 1 and isinstance(row[0], int):
            return row[0]
        return None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        try:
            return self._cur.execute(sql, params).fetchall()
        except duckdb.Error as exc:
            raise _to_adapter_error(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            try:
                self._cur.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise
        self.execute("COMMIT")

    def interrupt(self) -> None:
        try:
            self._cur.interrupt()
        except duckdb.Error:
            pass

    def close(self) -> None:
        try:
            self._cur.close()
        except duckdb.Error:
            pass


class DuckDbAdapter(DuckDbSession):
    """A DuckDB database file (or in-memory database) as a warehouse."""

    type = "duckdb"

    def __init__(self, name: str, path: Path | None, *, read_only: bool = False) -> None:
        self.name = name
        self.path = path
        self.catalog = path.stem if path is not None else "memory"
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            con = duckdb.connect(str(path) if path is not None else ":memory:", read_only=read_only)
        except duckdb.Error as exc:
            raise _open_error(name, path, exc) from exc
        self._con = con
        self._read_only = read_only
        super().__init__(con)

    def maintenance(self) -> Maintenance | None:
        if self.path is None or self._read_only:
            return None
        return WalCheckpoint(self, Path(f"{self.path}.wal"), WAL_CHECKPOINT_BYTES)

    def session(self) -> DuckDbSession:
        return DuckDbSession(self._con.cursor())

    def quote(self, identifier: str) -> str:
        return quote_ident(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        return ".".join(quote_ident(p) for p in (catalog or self.catalog, schema, table))

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        rows = self.query(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_catalog = ? AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
            [catalog or self.catalog, schema, table],
        )
        return [Column(str(r[0]), str(r[1]), str(r[2]).upper() != "NO") for r in rows]

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        rows = self.query(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_catalog = ? AND table_schema = ? AND table_name = ?",
            [catalog or self.catalog, schema, table],
        )
        return bool(rows)

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = ? ORDER BY 1",
            [catalog or self.catalog],
        )
        return [str(r[0]) for r in rows]

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = ? AND table_schema = ? AND table_type = 'BASE TABLE' ORDER BY 1",
            [catalog or self.catalog, schema],
        )
        return [str(r[0]) for r in rows]

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        rows = self.query(
            "SELECT table_catalog, table_schema, table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = ?",
            [catalog or self.catalog],
        )
        return [
            Relation(str(r[0]), str(r[1]), str(r[2]), "view" if str(r[3]).upper() == "VIEW" else "table")
            for r in rows
        ]

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        if schema in self.list_schemas(catalog):
            return False
        cat = quote_ident(catalog or self.catalog)
        self.execute(f"CREATE SCHEMA IF NOT EXISTS {cat}.{quote_ident(schema)}")
        return True

    def close(self) -> None:
        try:
            self._con.close()
        except duckdb.Error:
            pass


class WalCheckpoint:
    """Checkpoint the database file once its write-ahead log passes ``threshold`` bytes.

    DuckDB checkpoints by itself only at a commit made while no other transaction is open. Several
    cursors writing at once almost always have one open, so over a long run the WAL grows to the size of
    everything written and DuckDB keeps all of it in memory (measured: a 1.9 GB WAL and 2.6 GB peak RSS
    for the 1000-model benchmark, against a 0.5 GB database). A moment with every session idle lets the
    checkpoint run.
    """

    def __init__(self, adapter: DuckDbAdapter, wal: Path, threshold: int) -> None:
        self._adapter = adapter
        self._wal = wal
        self._threshold = threshold
        self._due_at = threshold

    def _wal_bytes(self) -> int:
        try:
            return self._wal.stat().st_size
        except OSError:  # no WAL: nothing written since the last checkpoint
            return 0

    def due(self) -> bool:
        return self._wal_bytes() >= self._due_at

    def run(self) -> None:
        # A cursor of its own: the adapter's main cursor may be serving another thread (replication's
        # watermark reader).
        session = self._adapter.session()
        try:
            session.execute("CHECKPOINT")
        except AdapterError as exc:  # DuckDB checkpoints at close anyway; the run goes on
            log.debug("checkpoint skipped: %s", exc)
        finally:
            session.close()
        # A checkpoint that could not run leaves the WAL as it was: wait for as much again.
        self._due_at = self._wal_bytes() + self._threshold


def _to_adapter_error(exc: duckdb.Error) -> AdapterError:
    kind = classify(exc)
    return AdapterError(first_line(str(exc)), failure_kind=kind)


def _open_error(name: str, path: Path | None, exc: duckdb.Error) -> AdapterError:
    text = str(exc)
    if "lock" in text.lower():
        pid = _LOCK_PID.search(text)
        holder = f" (PID {pid.group(1)})" if pid else ""
        return AdapterError(
            f"DuckDB file {path} of adapter '{name}' is locked by another process{holder}",
            failure_kind="connection-failed",
            hint="wait for that process to finish or stop it, then run again",
        )
    return AdapterError(
        f"cannot open DuckDB file {path} of adapter '{name}': {first_line(text)}",
        failure_kind=classify(exc),
        hint="check the path in [adapter] and that the file is a DuckDB database",
    )
