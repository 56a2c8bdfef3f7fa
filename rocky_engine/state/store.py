"""The state store: one SQLite file per project, one writer at a time, readers alongside.

Opening rules (CONTRACT section 5, seeds/deployment-contract.md "Mixed versions during an upgrade"):

- A writer creates the directory, takes a non-blocking exclusive ``flock`` on ``<file>.lock`` (a second
  writer fails fast with ``StateLockedError``), and migrates an older store forward in one transaction.
- A reader opens the file read-only and never holds the writer lock while it reads. A missing file reads
  as an empty store. An older store is migrated forward by the first command that opens it, readers
  included (seeds/deployment-contract.md: "It migrates the store forward on first open. Every command
  does this"): the reader takes the writer lock without waiting, migrates the file in one transaction,
  releases the lock and reads the migrated file. Only when the writer is busy (or the file is not the
  user's to write) does it read a private in-memory copy migrated there, leaving the file as it is.
- A store newer than this engine is refused (``StateSchemaError``), or with ``on_newer="recreate"`` left
  untouched while the caller works on a fresh temporary store flagged ``downgraded`` (never uploaded).

SQLite settings: WAL (readers never block the writer), ``busy_timeout`` 5000 ms, and ``synchronous=FULL``:
writes are batched per run, so an fsync per commit costs a few milliseconds per run, and in exchange a
committed idempotency claim, scheduler claim or watermark survives a power loss, not only a crash.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

from rocky_engine.errors import StateError, StateLockedError, StateSchemaError
from rocky_engine.logs import get_logger
from rocky_engine.state import schema
from rocky_engine.state.lock_holder import describe_holder, write_holder
from rocky_engine.state.store_errors import (
    BUSY_CODES,
    CORRUPT_CODES,
    READONLY_CODES,
    damaged_store_error,
    sqlite_code,
    state_error,
)
from rocky_engine.state.store_errors import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS  # re-exported

if TYPE_CHECKING:
    from rocky_engine.state.check_history import CheckHistoryRepo
    from rocky_engine.state.idempotency import IdempotencyRepo
    from rocky_engine.state.progress import ProgressRepo
    from rocky_engine.state.runs import RunRepo
    from rocky_engine.state.watermarks import WatermarkRepo

OnNewer = Literal["refuse", "recreate"]

T = TypeVar("T")
R = TypeVar("R")

log = get_logger("state")


def lock_path_of(path: Path) -> Path:
    """The writer lock file of a store: ``x.db`` -> ``x.db.lock``."""
    return path.with_name(path.name + ".lock")


class StateStore:
    """An open state store. Use :meth:`open`; close it (or use ``with``) to release the writer lock."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        path: Path,
        db_path: Path | None,
        writer: bool,
        lock_fd: int | None = None,
        downgraded: bool = False,
        temp_dir: Path | None = None,
    ) -> None:
        self._conn = conn
        self._mutex = threading.RLock()
        self._lock_fd = lock_fd
        self._temp_dir = temp_dir
        self._savepoints = 0
        self._closed = False
        #: The store the caller asked for (messages, remote sync keys).
        self.path = path
        #: The file actually open: ``path``, a temporary file when downgraded, ``None`` when in memory.
        self.db_path = db_path
        self.writer = writer
        #: True when a newer store was set aside for a fresh temporary one; never upload this store.
        self.downgraded = downgraded

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        writer: bool = True,
        on_newer: OnNewer = "refuse",
        migrations: Sequence[str] | None = None,
        wait_seconds: float = 0,
        wait_purpose: str = "",
    ) -> StateStore:
        """Open the store at ``path`` as a writer (default) or a reader.

        Args:
            path: the SQLite file (see ``state.location``).
            writer: take the writer lock and allow transactions.
            on_newer: what to do with a store newer than this engine.
            migrations: the migration scripts to apply (tests and tools); default ``schema.MIGRATIONS``.
            wait_seconds: a writer waits up to this long for a lock another process holds
                (``--wait-for-lock``), saying once in the log who holds it; 0 fails at once.
            wait_purpose: what the wait is for, in that log line (``commit the state``).

        Raises:
            StateLockedError: another writer holds the lock (still, after ``wait_seconds``).
            StateSchemaError: the store is newer than this engine and ``on_newer="refuse"``.
            StateError: the file is not a state store, or cannot be read or migrated.
        """
        path = Path(path)
        scripts = tuple(schema.MIGRATIONS if migrations is None else migrations)
        if writer:
            return cls._open_writer(path, scripts, on_newer, wait_seconds, wait_purpose)
        return cls._open_reader(path, scripts, on_newer)

    @classmethod
    def _open_writer(
        cls, path: Path, scripts: tuple[str, ...], on_newer: OnNewer, wait_seconds: float = 0,
        wait_purpose: str = "",
    ) -> StateStore:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create the state store directory {path.parent}: {exc}") from exc
        lock_fd = _acquire_lock(path, wait_seconds, wait_purpose)
        conn: sqlite3.Connection | None = None
        temp_dir: Path | None = None
        try:
            conn = _connect(str(path), uri=False, path=path)
            version = _read_version(conn, path)
            if version > len(scripts):
                _refuse_or_warn(path, version, len(scripts), on_newer)
                conn.close()
                # The newer store stays as it is; this run works on a throwaway store of its own while
                # still holding the project's writer lock.
                temp_dir = Path(tempfile.mkdtemp(prefix="rocky-state-downgraded-"))
                temp_db = temp_dir / "state.db"
                conn = _connect(str(temp_db), uri=False, path=temp_db)
                _configure_writer(conn, temp_db)
                _migrate(conn, 0, scripts, temp_db)
                return cls(
                    conn, path=path, db_path=temp_db, writer=True, lock_fd=lock_fd,
                    downgraded=True, temp_dir=temp_dir,
                )
            _configure_writer(conn, path)
            if version < len(scripts):
                _migrate(conn, version, scripts, path)
            return cls(conn, path=path, db_path=path, writer=True, lock_fd=lock_fd)
        except BaseException:
            if conn is not None:
                conn.close()
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            os.close(lock_fd)
            raise

    @classmethod
    def _open_reader(cls, path: Path, scripts: tuple[str, ...], on_newer: OnNewer) -> StateStore:
        if not path.exists():
            # A fresh project has no store yet: read it as empty rather than fail `rocky history`.
            return cls(_empty_memory(scripts, path), path=path, db_path=None, writer=False)
        uri = f"file:{quote(str(path.absolute()))}?mode=ro"
        conn = _connect(uri, uri=True, path=path)
        try:
            version = _read_version(conn, path)
            if version > len(scripts):
                _refuse_or_warn(path, version, len(scripts), on_newer)
                conn.close()
                return cls(
                    _empty_memory(scripts, path), path=path, db_path=None, writer=False, downgraded=True
                )
            if version < len(scripts):
                # "It migrates the store forward on first open. Every command does this": a reader too,
                # under the writer lock, and reads the migrated file.
                conn.close()
                migrated = _migrate_in_place(path, scripts)
                conn = _connect(uri, uri=True, path=path)
                version = _read_version(conn, path) if migrated else version
            if version < len(scripts):
                conn = _migrated_copy(conn, path, scripts)
                db_path = None
            else:
                db_path = path
            conn.execute("PRAGMA query_only = ON")
            return cls(conn, path=path, db_path=db_path, writer=False)
        except BaseException:
            conn.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection, release the writer lock, drop a downgraded temporary store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ access

    @property
    def schema_version(self) -> int:
        rows = self.query("SELECT value FROM metadata WHERE key = 'schema_version'")
        return int(rows[0][0]) if rows else 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception).

        Nested use joins the enclosing transaction through a savepoint, so a repository method called
        inside a caller's transaction commits with it (and rolls back alone if it raises).
        """
        if not self.writer:
            raise StateError(
                f"state store at {self.path} is open read-only; open it as a writer to change it"
            )
        with self._mutex:
            conn = self._conn
            if conn.in_transaction:
                yield from self._savepoint(conn)
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise state_error(self.path, exc, "begin a transaction") from exc
            try:
                yield conn
            except BaseException as exc:
                _rollback(conn, "ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise state_error(self.path, exc, "write") from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn, "ROLLBACK")
                raise state_error(self.path, exc, "commit") from exc

    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        self._savepoints += 1
        name = f"rocky_sp{self._savepoints}"
        try:
            conn.execute(f"SAVEPOINT {name}")
            try:
                yield conn
            except BaseException:
                _rollback(conn, f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                raise
            conn.execute(f"RELEASE {name}")
        finally:
            self._savepoints -= 1

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run one read statement and return all its rows (sqlite errors become ``StateError``)."""
        with self._mutex:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise state_error(self.path, exc, "read") from exc

    def query_tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """:meth:`query` with plain tuples for rows: for the wide reads of every row of a table, where
        building a ``sqlite3.Row`` per row costs as much as the read itself."""
        with self._mutex:
            try:
                cursor = self._conn.cursor()
                cursor.row_factory = None
                rows: list[tuple[Any, ...]] = cursor.execute(sql, params).fetchall()
                return rows
            except sqlite3.Error as exc:
                raise state_error(self.path, exc, "read") from exc

    def decoded(self, rows: Sequence[R], decode: Callable[[R], T]) -> list[T]:
        """``rows`` turned into ``T`` by ``decode``; a row that does not decode (a damaged timestamp, JSON
        value or enum in the file) is the one-line ``StateError`` of a damaged store."""
        with self.decoding():
            return [decode(row) for row in rows]

    def first(self, rows: Sequence[sqlite3.Row], decode: Callable[[sqlite3.Row], T]) -> T | None:
        """The first of ``rows`` decoded (see :meth:`decoded`), or None when there is none."""
        with self.decoding():
            return decode(rows[0]) if rows else None

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """Turn a stored value that does not parse into the one-line error of a damaged store.

        SQLite's own checks pass a file whose text cells were overwritten with other text, so the values
        the repositories parse (timestamps, JSON, pydantic models) are where such damage shows.
        """
        try:
            yield
        except (ValueError, TypeError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
            raise damaged_store_error(self.path, f"a stored value cannot be read ({exc})") from exc

    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM metadata WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO metadata (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # ------------------------------------------------------------------ repositories

    @cached_property
    def watermarks(self) -> WatermarkRepo:
        from rocky_engine.state.watermarks import WatermarkRepo

        return WatermarkRepo(self)

    @cached_property
    def runs(self) -> RunRepo:
        from rocky_engine.state.runs import RunRepo

        return RunRepo(self)

    @cached_property
    def progress(self) -> ProgressRepo:
        from rocky_engine.state.progress import ProgressRepo

        return ProgressRepo(self)

    @cached_property
    def idempotency(self) -> IdempotencyRepo:
        from rocky_engine.state.idempotency import IdempotencyRepo

        return IdempotencyRepo(self)

    @cached_property
    def checks(self) -> CheckHistoryRepo:
        from rocky_engine.state.check_history import CheckHistoryRepo

        return CheckHistoryRepo(self)


# ---------------------------------------------------------------------- helpers


def try_writer_lock(path: Path) -> int | None:
    """Take the writer lock of the store at ``path`` without waiting: its fd, or None when another holds it.

    Raises:
        StateError: the lock file cannot be opened or locked (not merely busy).
    """
    lock_file = lock_path_of(path)
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateError(f"cannot open the state store lock file {lock_file}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise StateError(f"cannot lock the state store lock file {lock_file}: {exc}") from exc
    write_holder(fd)
    return fd


def _acquire_lock(path: Path, wait_seconds: float = 0, purpose: str = "") -> int:
    """The writer lock, waiting up to ``wait_seconds`` for its holder (one log line names it), with the
    holder's identity written into the lock file for the next waiter."""
    fd = try_writer_lock(path)
    if fd is None and wait_seconds > 0:
        log.warning("state store %s is locked by %s; waiting up to %g s %s", path,
                    describe_holder(lock_path_of(path)), wait_seconds,
                    f"to {purpose}" if purpose else "for it")
        deadline = time.monotonic() + wait_seconds
        pause = 0.05
        while fd is None and time.monotonic() < deadline:
            # flock has no timeout: poll, backing off to 1 s so a long wait costs nothing.
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)
            fd = try_writer_lock(path)
    if fd is None:
        holder = describe_holder(lock_path_of(path))
        raise StateLockedError(path, holder=holder) if wait_seconds <= 0 else StateLockedError(
            path, holder=holder, hint=f"it was still held by {holder} after {wait_seconds:g} s of waiting")
    return fd  # try_writer_lock recorded this process as the holder


def _connect(target: str, *, uri: bool, path: Path) -> sqlite3.Connection:
    try:
        # isolation_level=None: the store issues BEGIN/COMMIT itself (see transaction()).
        conn = sqlite3.connect(
            target, uri=uri, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise state_error(path, exc, "open") from exc
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _configure_writer(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error as exc:
        raise state_error(path, exc, "open") from exc


def _migrate_in_place(path: Path, scripts: tuple[str, ...]) -> bool:
    """Migrate the older store at ``path`` for a reader, under the writer lock; False when it cannot now.

    The lock is taken without waiting. A busy writer is either an engine of this version (it migrated
    the file when it opened it) or an older one still running (its store must not change under it); either
    way the reader reads the file as it is and the next command that finds the lock free migrates it. A
    file or directory this user cannot write is read as it is too.
    """
    try:
        fd = try_writer_lock(path)
    except StateError:
        return False  # no lock file can be made here (a read-only directory): not ours to migrate
    if fd is None:
        log.debug(f"state store at {path} has an older schema and its writer is busy; reading it as is")
        return False
    try:
        conn = _connect(str(path), uri=False, path=path)
        try:
            _configure_writer(conn, path)
            version = _read_version(conn, path)
            if version < len(scripts):
                _migrate(conn, version, scripts, path)
        finally:
            conn.close()
    except StateError as exc:
        if isinstance(exc.__cause__, sqlite3.Error) and sqlite_code(exc.__cause__) in READONLY_CODES:
            return False
        raise
    finally:
        os.close(fd)
    return True


def _migrated_copy(conn: sqlite3.Connection, path: Path, scripts: tuple[str, ...]) -> sqlite3.Connection:
    """A private in-memory copy of the older store behind ``conn`` (closed), migrated: a reader that cannot
    migrate the file reads this."""
    memory = _connect(":memory:", uri=False, path=path)
    try:
        conn.backup(memory)
    except sqlite3.Error as exc:
        memory.close()
        raise state_error(path, exc, "copy the store for reading") from exc
    finally:
        conn.close()
    try:
        # The version of the copy itself: a writer may have migrated the file since it was first read.
        _migrate(memory, _read_version(memory, path), scripts, path)
    except BaseException:
        memory.close()
        raise
    return memory


def _empty_memory(scripts: tuple[str, ...], path: Path) -> sqlite3.Connection:
    conn = _connect(":memory:", uri=False, path=path)
    _migrate(conn, 0, scripts, path)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _read_version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not names:
            return 0
        if "metadata" not in names:
            raise StateError(
                f"{path} is a SQLite database but not a rocky state store (it has no metadata table)",
                hint="point --state-path at a rocky state file, or move this file aside",
            )
        row = conn.execute("SELECT value FROM metadata WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error as exc:
        raise state_error(path, exc, "read") from exc
    try:
        return int(row[0]) if row is not None else 0
    except (TypeError, ValueError):
        raise StateError(
            f"state store at {path} has an unreadable schema_version {row[0]!r}",
            hint=f"move it aside (mv {path} {path}.corrupt) and rerun to start a fresh store",
        ) from None


def _refuse_or_warn(path: Path, version: int, supported: int, on_newer: OnNewer) -> None:
    if on_newer == "refuse":
        raise StateSchemaError(
            f"state store at {path} has schema version {version}, newer than this engine supports "
            f"({supported}); upgrade rocky, or restore the pre-upgrade copy"
        )
    log.warning(
        f"state store at {path} has schema version {version}, newer than this engine supports "
        f"({supported}); on_schema_mismatch = recreate: running from a fresh local state that is "
        "discarded afterwards and never uploaded; the store on disk is left untouched"
    )


def _migrate(conn: sqlite3.Connection, start: int, scripts: tuple[str, ...], path: Path) -> None:
    """Apply ``scripts[start:]`` and record the new version, all in one transaction."""
    from rocky_engine import __version__

    target = len(scripts)
    # executescript() commits any open transaction before it runs, so the transaction lives inside the
    # script; on error the script stops with the transaction still open and we roll it back.
    upsert = (
        "INSERT INTO metadata (key, value) VALUES ('{k}', '{v}') "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value;"
    )
    engine = __version__.replace("'", "")
    script = "\n".join(
        [
            "BEGIN IMMEDIATE;",
            *scripts[start:],
            upsert.format(k="schema_version", v=target),
            upsert.format(k="engine_version", v=engine),
            "COMMIT;",
        ]
    )
    try:
        conn.executescript(script)
    except sqlite3.Error as exc:
        _rollback(conn, "ROLLBACK")
        code = sqlite_code(exc)
        if code in CORRUPT_CODES | BUSY_CODES or code == "SQLITE_FULL" or code.startswith("SQLITE_IOERR"):
            raise state_error(path, exc, "migrate") from exc
        raise StateError(
            f"could not migrate state store at {path} from schema version {start} to {target}: {exc}",
            hint="the store was left unchanged; report this with the output of `rocky doctor`",
        ) from exc


def _rollback(conn: sqlite3.Connection, statement: str) -> None:
    if conn.in_transaction:
        try:
            conn.execute(statement)
        except sqlite3.Error:
            pass  # the original error is the one worth reporting
