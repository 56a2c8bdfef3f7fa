"""State snapshots: the file an upload carries, and how a downloaded one lands in the local store.

A snapshot is a plain SQLite file made with ``VACUUM INTO`` (a consistent copy taken while the writer
lock is held) with the local-only tables (``schema.LOCAL_ONLY_TABLES``) emptied and the metadata cut
down to the schema and engine versions. The local-only tables keep their (empty) definitions so that a
snapshot written by an older engine can still be migrated forward like any store.

A download replaces every syncable table of the local store in one transaction and never touches the
local-only tables or the metadata: the scheduler's cursors and claims, the server's jobs and the local
bookkeeping (the remote generation, the brief cursor) describe this machine, not the project.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from rocky_engine.state import schema
from rocky_engine.state.remote.backend import RemoteStateError

#: metadata rows a snapshot keeps; the rest is per machine
SNAPSHOT_META_KEYS: tuple[str, ...] = ("schema_version", "engine_version")
_BUSY_TIMEOUT_S = 5.0


def export_snapshot(db_path: Path, work_dir: Path) -> bytes:
    """The upload bytes of the store at ``db_path`` (its local-only tables emptied).

    Args:
        db_path: the open store's file (``store.db_path``); read through a second connection.
        work_dir: a private directory for the copy.
    """
    target = work_dir / "upload.sqlite"
    target.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(str(db_path), isolation_level=None, timeout=_BUSY_TIMEOUT_S)
        try:
            src.execute("VACUUM INTO ?", (str(target),))
        finally:
            src.close()
        conn = sqlite3.connect(str(target), isolation_level=None)
        try:
            tables = _tables(conn, "main")
            conn.execute("BEGIN")
            for table in schema.LOCAL_ONLY_TABLES:
                if table in tables:
                    conn.execute(f'DELETE FROM "{table}"')
            if "metadata" in tables:
                marks = ", ".join("?" for _ in SNAPSHOT_META_KEYS)
                conn.execute(f"DELETE FROM metadata WHERE key NOT IN ({marks})", SNAPSHOT_META_KEYS)
            conn.execute("COMMIT")
            # Reclaim the pages the local-only rows used, so the upload carries none of their bytes.
            conn.execute("VACUUM")
        finally:
            conn.close()
        return target.read_bytes()
    except sqlite3.Error as exc:
        raise RemoteStateError(f"could not snapshot the state store at {db_path} for upload: {exc}") from exc
    finally:
        target.unlink(missing_ok=True)


def snapshot_version(path: Path, source: str) -> int:
    """The schema version of a downloaded snapshot.

    Raises:
        RemoteStateError: the bytes are not a rocky state store (corrupt, truncated, or something else).
    """
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
        try:
            row = conn.execute("SELECT value FROM metadata WHERE key = 'schema_version'").fetchone()
        finally:
            conn.close()
        version = int(row[0]) if row is not None else 0
    except (sqlite3.Error, TypeError, ValueError) as exc:
        raise RemoteStateError(
            f"the remote state at {source} is not a readable rocky state snapshot ({exc})",
            hint="inspect or delete that object; the next successful upload replaces it",
        ) from None
    if version < 1:
        raise RemoteStateError(
            f"the remote state at {source} has no schema version; it is not a rocky state snapshot",
            hint="inspect or delete that object; the next successful upload replaces it",
        )
    return version


def import_snapshot(db_path: Path, snapshot: Path) -> list[str]:
    """Replace the syncable tables of the store at ``db_path`` with the snapshot's, in one transaction.

    The caller holds the store's writer lock and has brought the snapshot to this engine's schema
    version. Returns the tables replaced.
    """
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=_BUSY_TIMEOUT_S)
    replaced: list[str] = []
    try:
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("ATTACH DATABASE ? AS remote", (str(snapshot),))
        local_tables = _tables(conn, "main")
        remote_tables = set(_tables(conn, "remote"))
        skip = {*schema.LOCAL_ONLY_TABLES, "metadata"}
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table in local_tables:
                if table in skip:
                    continue
                conn.execute(f'DELETE FROM main."{table}"')
                if table in remote_tables:
                    theirs = set(_columns(conn, "remote", table))
                    cols = ", ".join(f'"{c}"' for c in _columns(conn, "main", table) if c in theirs)
                    conn.execute(f'INSERT INTO main."{table}" ({cols}) SELECT {cols} FROM remote."{table}"')
                replaced.append(table)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("DETACH DATABASE remote")
    except sqlite3.Error as exc:
        raise RemoteStateError(
            f"could not load the downloaded state into {db_path}: {exc}",
            hint="the local store was left unchanged",
        ) from exc
    finally:
        conn.close()
    return replaced


def _tables(conn: sqlite3.Connection, db: str) -> list[str]:
    rows = conn.execute(
        f"SELECT name FROM {db}.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _columns(conn: sqlite3.Connection, db: str, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA {db}.table_info("{table}")').fetchall()]
