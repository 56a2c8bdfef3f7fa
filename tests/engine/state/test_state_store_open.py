"""Opening the state store: writer lock, readers, migrations, newer stores, corrupt files, transactions."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocky_engine.errors import StateDamagedError, StateError, StateLockedError, StateSchemaError
from rocky_engine.state import SCHEMA_VERSION, StateStore, lock_path_of
from rocky_engine.state.schema import MIGRATIONS

ALL_TABLES = {
    "watermarks", "run_history", "run_progress", "check_history", "idempotency_keys", "loaded_files",
    "connector_state", "schedule_state", "schedule_claims", "jobs", "metadata",
}

# the other writer is named from the lock file (pid, command, since when)
LOCKED = (
    "state store at {p} is locked by another process (pid {pid} on {host} ({command}), since {since}); "
    "only one rocky writer can run at a time against the same state file"
)
_HOLDER = re.compile(r"\(pid \d+ on (\S+) \((rocky[a-z ]*)\), since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\)")


def _locked(message: str, path: Path, pid: int) -> str:
    """LOCKED for ``path`` held by ``pid``, with the command and start time the message gives (checked for
    shape: the command the holder process last ran in process, the time it took the lock)."""
    found = _HOLDER.search(message)
    assert found is not None, message
    assert found.group(1) == socket.gethostname()
    return LOCKED.format(p=path, pid=pid, host=found.group(1), command=found.group(2), since=found.group(3))

# Holds the writer lock until stdin closes; prints "ready" once it holds it. An optional second argument
# plays an older engine: the number of migrations it knows.
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rocky_engine.state import StateStore
    from rocky_engine.state.schema import MIGRATIONS
    known = int(sys.argv[2]) if len(sys.argv) > 2 else len(MIGRATIONS)
    store = StateStore.open(Path(sys.argv[1]), migrations=MIGRATIONS[:known])
    print("ready", flush=True)
    sys.stdin.read()
    store.close()
    """
)

# Tries to become a writer once and reports what happened.
SECOND_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rocky_engine.errors import StateLockedError
    from rocky_engine.state import StateStore
    try:
        StateStore.open(Path(sys.argv[1])).close()
    except StateLockedError as exc:
        print("StateLockedError:" + str(exc))
        sys.exit(3)
    print("opened")
    """
)


def _raw_version(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT value FROM metadata WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


def _set_raw_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE metadata SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()


def _tables(store: StateStore) -> set[str]:
    return {r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A real second process holding the writer lock of tmp_path/state.db."""
    path = tmp_path / "state.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    yield path, proc
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------- creation


def test_writer_creates_store_with_every_table(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "state.db"
    with StateStore.open(path) as store:
        assert path.is_file()
        assert lock_path_of(path) == tmp_path / "deep" / "dir" / "state.db.lock"
        assert lock_path_of(path).is_file()
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
        assert _tables(store) >= ALL_TABLES
        assert store.query("PRAGMA journal_mode")[0][0] == "wal"
        assert store.query("PRAGMA synchronous")[0][0] == 2  # FULL
        assert store.query("PRAGMA busy_timeout")[0][0] == 5000
        assert store.writer and not store.downgraded
        assert store.get_meta("engine_version")
    assert _raw_version(path) == str(SCHEMA_VERSION)


def test_reopen_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as store:
        store.watermarks.set("c.s.t", "42")
    with StateStore.open(path) as store:
        assert store.watermarks.get("c.s.t") == "42"


def test_reader_of_missing_file_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "state.db"
    with StateStore.open(path, writer=False) as store:
        assert store.runs.list() == []
        assert store.watermarks.all() == []
        assert store.db_path is None
        assert store.schema_version == SCHEMA_VERSION
    assert not path.parent.exists()


def test_reader_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore.open(path).close()
    with StateStore.open(path, writer=False) as store:
        with pytest.raises(StateError, match="is open read-only"):
            store.watermarks.set("a.b.c", "1")
        with pytest.raises(StateError, match="attempt to write a readonly database"):
            store.query("INSERT INTO watermarks VALUES ('a', 'b', 'c')")


# --------------------------------------------------------------------------- the writer lock


def test_second_writer_in_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path):
        proc = subprocess.run(
            [sys.executable, "-c", SECOND_WRITER, str(path)], capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 3, proc.stderr
    message = proc.stdout.strip()
    assert message == "StateLockedError:" + _locked(message, path, os.getpid())
    # released on close: the same process can now be a writer
    proc = subprocess.run(
        [sys.executable, "-c", SECOND_WRITER, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "opened", proc.stderr


def test_writer_held_by_another_process_refuses_us(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    path, proc = holder
    with pytest.raises(StateLockedError) as info:
        StateStore.open(path)
    assert str(info.value) == _locked(str(info.value), path, proc.pid)
    assert info.value.exit_code == 1


def test_readers_proceed_while_a_writer_holds_the_lock(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    path, _ = holder
    with StateStore.open(path, writer=False) as store:
        assert store.runs.list() == []
        assert store.schema_version == SCHEMA_VERSION


def test_lock_is_released_when_the_holder_is_killed(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    path, proc = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    with StateStore.open(path) as store:
        assert store.writer


def test_lock_is_per_open_even_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path), pytest.raises(StateLockedError):
        StateStore.open(path)


# --------------------------------------------------------------------------- migrations


V2 = "CREATE TABLE fake_v2 (x INTEGER);\nALTER TABLE watermarks ADD COLUMN note TEXT;"


def test_older_store_is_migrated_forward_on_writer_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path, migrations=MIGRATIONS[:1]) as store:
        assert store.schema_version == 1
        store.watermarks.set("c.s.t", "7")
    with StateStore.open(path, migrations=(*MIGRATIONS[:1], V2)) as store:
        assert store.schema_version == 2
        assert "fake_v2" in _tables(store)
        assert store.watermarks.get("c.s.t") == "7"
        cols = {r[1] for r in store.query("PRAGMA table_info(watermarks)")}
        assert "note" in cols
    assert _raw_version(path) == "2"


def test_a_reader_migrates_the_file_under_the_writer_lock(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path, migrations=MIGRATIONS[:1]) as store:
        store.watermarks.set("c.s.t", "7")
    with StateStore.open(path, writer=False, migrations=(*MIGRATIONS[:1], V2)) as store:
        assert store.schema_version == 2
        assert store.db_path == path  # the file itself, migrated
        assert store.watermarks.get("c.s.t") == "7"
    assert _raw_version(path) == "2"
    # the lock was released: a writer opens at once
    StateStore.open(path, migrations=(*MIGRATIONS[:1], V2)).close()


def test_a_reader_with_a_busy_writer_migrates_an_in_memory_copy_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path, migrations=MIGRATIONS[:1]) as store:
        store.watermarks.set("c.s.t", "7")
    before = path.read_bytes()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), "1"],  # an older engine, still running
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        with StateStore.open(path, writer=False) as store:
            assert store.schema_version == SCHEMA_VERSION
            assert store.db_path is None
            assert store.watermarks.get("c.s.t") == "7"
            assert {"owner", "attempts"} <= {r[1] for r in store.query("PRAGMA table_info(jobs)")}
        assert _raw_version(path) == "1"
        assert path.read_bytes() == before
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_failed_migration_leaves_the_store_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore.open(path, migrations=MIGRATIONS[:1]).close()
    broken = "CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);"
    with pytest.raises(StateError) as info:
        StateStore.open(path, migrations=(*MIGRATIONS[:1], broken))
    assert str(info.value).startswith(
        f"could not migrate state store at {path} from schema version 1 to 2: no such table: no_such_table"
    )
    assert "left unchanged" in str(info.value)
    assert _raw_version(path) == "1"
    with StateStore.open(path) as store:
        assert "half_done" not in _tables(store)


def test_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore.open(path).close()
    _set_raw_version(path, 999)
    expected = (
        f"state store at {path} has schema version 999, newer than this engine supports "
        f"({SCHEMA_VERSION}); upgrade rocky, or restore the pre-upgrade copy"
    )
    for writer in (True, False):
        with pytest.raises(StateSchemaError) as info:
            StateStore.open(path, writer=writer)
        assert str(info.value) == expected
    # the refused writer released its lock
    StateStore.open(path, on_newer="recreate").close()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def state_log() -> Iterator[_Records]:
    handler = _Records()
    logger = logging.getLogger("rocky.state")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_recreate_runs_on_a_fresh_temporary_store(tmp_path: Path, state_log: _Records) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as store:
        store.watermarks.set("c.s.t", "old")
    _set_raw_version(path, 999)
    before = path.read_bytes()
    store = StateStore.open(path, on_newer="recreate")
    try:
        assert store.downgraded
        assert store.path == path
        assert store.db_path is not None and store.db_path != path
        assert store.watermarks.get("c.s.t") is None  # fresh
        store.watermarks.set("c.s.t", "new")
        assert store.watermarks.get("c.s.t") == "new"
        # it still holds the project's writer lock
        with pytest.raises(StateLockedError):
            StateStore.open(path, on_newer="recreate")
        temp_dir = store.db_path.parent
    finally:
        store.close()
    assert not temp_dir.exists()
    assert path.read_bytes() == before
    assert _raw_version(path) == "999"
    warnings = [r for r in state_log.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "schema version 999" in warnings[0].getMessage()
    assert "never uploaded" in warnings[0].getMessage()


def test_reader_recreate_is_empty_and_downgraded(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as store:
        store.watermarks.set("c.s.t", "old")
    _set_raw_version(path, 999)
    with StateStore.open(path, writer=False, on_newer="recreate") as store:
        assert store.downgraded
        assert store.watermarks.all() == []


# --------------------------------------------------------------------------- bad files


@pytest.mark.parametrize("writer", [True, False])
def test_corrupt_file_names_the_file_and_says_to_move_it(tmp_path: Path, writer: bool) -> None:
    path = tmp_path / "state.db"
    garbage = b"this is not a database, just some bytes\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StateError) as info:
        StateStore.open(path, writer=writer)
    message = str(info.value)
    assert message.startswith(f"state store at {path} is damaged: SQLite cannot ")
    assert isinstance(info.value, StateDamagedError)
    assert f"move it aside (mv {path} {path}.corrupt)" in message
    assert path.read_bytes() == garbage
    # a failed writer open does not keep the lock: the next attempt meets the same error, not the lock
    with pytest.raises(StateError) as again:
        StateStore.open(path)
    assert not isinstance(again.value, StateLockedError)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StateError) as info:
        StateStore.open(path)
    assert str(info.value).startswith(f"{path} is a SQLite database but not a rocky state store")
    with pytest.raises(StateError):
        StateStore.open(path, writer=False)


def test_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    with StateStore.open(path, writer=False) as store:
        assert store.runs.list() == []
    with StateStore.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION


# --------------------------------------------------------------------------- transactions


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.db") as store:
        with pytest.raises(RuntimeError), store.transaction():
            store.watermarks.set_many({"a.b.c": "1", "d.e.f": "2"})
            raise RuntimeError("boom")
        assert store.watermarks.all() == []


def test_nested_transaction_joins_and_can_roll_back_alone(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.db") as store:
        with store.transaction():
            store.watermarks.set("a.b.c", "1")
            with pytest.raises(KeyError), store.transaction():
                store.watermarks.set("d.e.f", "2")
                raise KeyError("inner")
        assert store.watermarks.get("a.b.c") == "1"
        assert store.watermarks.get("d.e.f") is None


def test_sqlite_errors_surface_as_state_errors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with StateStore.open(path) as store:
        expected = f"state store at {path}: could not write"
        with pytest.raises(StateError, match=expected), store.transaction() as conn:
            conn.execute("INSERT INTO no_such_table VALUES (1)")
        with pytest.raises(StateError, match="could not read"):
            store.query("SELECT nope FROM watermarks")


def test_close_is_idempotent(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state.db")
    store.close()
    store.close()
    StateStore.open(tmp_path / "state.db").close()


@pytest.mark.parametrize("writer", [True, False])
def test_a_directory_in_place_of_the_file_is_a_state_error(tmp_path: Path, writer: bool) -> None:
    path = tmp_path / "state.db"
    path.mkdir()
    with pytest.raises(StateError) as info:
        StateStore.open(path, writer=writer)
    assert str(info.value).startswith(f"state store at {path}: could not open")
    assert not isinstance(info.value, StateLockedError)
