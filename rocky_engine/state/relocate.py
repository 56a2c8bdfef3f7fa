"""Moving a state store found where an older engine put it to where ``state.location`` says it lives.

Older engines kept the store beside the models of the first transformation pipeline, so reordering the
pipelines of rocky.toml (or giving one a narrower glob) switched a project to an empty store. A project
upgraded from such an engine must never be given an empty store silently: the first command that finds the
old file moves it, under the writer lock, and says so in one log line.

The move holds the old store's writer lock, then the new one's, and:

1. checks again that the old file is there and the new one is not (another command may have moved it);
2. checkpoints the WAL into the database file (``TRUNCATE``: the ``-wal`` file ends empty), so the database
   file alone holds every committed transaction;
3. renames the database file (the commit point: one rename within one filesystem), then its ``-wal`` and
   ``-shm`` (a reader that still has them open keeps sharing its index with the next writer);
4. fsyncs both directories, removes the old lock file, and logs the move.

A crash before step 3 leaves the old store whole and the next command moves it; after it, the new file is
whole (its ``-wal`` is empty or gone). Nothing is ever merged or overwritten; each refusal is one line that
names the files and the command to run:

- a store at both places, or at several old places (which one holds the truth is for a person to say);
- an old file outside the project directory (it may be shared with another project) or a symlink;
- an old file SQLite cannot open, or a rename the filesystem refuses (another device, permissions).

An old store whose writer lock is held (an older rocky still running against it, or another command moving
it at this moment) is waited for briefly, since a move takes milliseconds. After that a writer fails as on
any held lock (a tick reports ``state_busy``), and a reader reads the old file where it is and leaves the
move to the next command that finds it free. A writer never works in place: a long-lived writer holding
the old path would recreate an empty store there after another command moved the file away.

An older engine still running *after* the move cannot see it: it would start a fresh store at the old
place (and the next command here then refuses, naming both). Upgrade every rocky that shares a project,
which ``docs/state.md`` asks for anyway.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from rocky_engine.errors import StateError, StateLockedError
from rocky_engine.logs import get_logger
from rocky_engine.state.lock_holder import describe_holder
from rocky_engine.state.store import BUSY_TIMEOUT_MS, lock_path_of, try_writer_lock

log = get_logger("state")

#: how long a command waits for an old store's writer lock (another command moving it takes milliseconds)
BUSY_WAIT_SECONDS = 2.0
_POLL_SECONDS = 0.05
_SIDE_FILES = ("-wal", "-shm")


def settle_state_file(
    current: Path, legacy: Sequence[Path], *, project_dir: Path, reading: bool,
    wait_seconds: float = BUSY_WAIT_SECONDS,
) -> Path:
    """The file to open when ``legacy`` lists stores found at older locations (see the module rules).

    Returns ``current`` once the old store is moved there (or was moved meanwhile); for a reader whose old
    store stays busy, the old file itself.

    Raises:
        StateLockedError: the old store stays busy and the caller writes.
        StateError: a refusal (both places hold a store, an unmovable old file).
    """
    if current.exists() or current.is_symlink():
        raise _both(current, legacy)
    if len(legacy) > 1:
        shown = ", ".join(f"{p} ({_summary(p)})" for p in legacy)
        raise StateError(
            f"this project has state stores at several older locations: {shown}; rocky will not merge them "
            "or pick one",
            hint=f"keep one (mv <it> {current}) and move the others away",
        )
    old = legacy[0]
    _check_movable(old, current, project_dir)
    deadline = time.monotonic() + wait_seconds
    while True:
        if _try_move(old, current):
            return current
        if time.monotonic() >= deadline:
            break
        time.sleep(_POLL_SECONDS)
    if reading:
        log.warning(
            f"the state store at {old} (an older location) is held by another rocky process; reading it "
            f"where it is (the next command that finds it free moves it to {current})"
        )
        return old
    raise StateLockedError(
        old, holder=describe_holder(lock_path_of(old)),
        hint=f"it sits where an older rocky kept it and moves to {current} once free; retry then",
    )


def _try_move(old: Path, new: Path) -> bool:
    """Move ``old`` to ``new`` under both writer locks; False when a lock is busy (nothing changed)."""
    old_fd = try_writer_lock(old)
    if old_fd is None:
        return False
    moved = False
    try:
        made = _make_parent(new)
        new_fd = try_writer_lock(new)
        if new_fd is None:
            return False
        try:
            if not old.exists():
                return True  # another command moved it while we waited for the lock
            if new.exists():
                raise _both(new, [old])
            _checkpoint(old, new)
            _rename_store(old, new, made)
            moved = True
        finally:
            os.close(new_fd)
    finally:
        if not old.exists():
            # Removed while held: a command that opened it before sees no store once it gets the lock.
            _unlink_quietly(lock_path_of(old))
        os.close(old_fd)
    if moved:
        log.warning(
            f"moved the state store from {old} to {new}: a project's store now has one place, whatever "
            "the pipelines of rocky.toml and their models globs (CONTRACT section 5)"
        )
    return True


def _checkpoint(old: Path, new: Path) -> None:
    """Fold the WAL into the database file so that the database file alone is the whole store."""
    try:
        conn = sqlite3.connect(str(old), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls back a hot journal
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StateError(
            f"cannot move the state store at {old} to {new}: SQLite cannot open it ({exc})",
            hint=f"check the file; to keep it, stop every rocky of this project and run: mv {old} {new}",
        ) from exc
    if busy:
        raise StateError(
            f"cannot move the state store at {old} to {new}: another process kept it busy for "
            f"{BUSY_TIMEOUT_MS // 1000} s",
            hint="retry when it finishes",
        )


def _rename_store(old: Path, new: Path, made: list[Path]) -> None:
    try:
        os.rename(old, new)
    except OSError as exc:
        why = "they are on different filesystems" if exc.errno == errno.EXDEV else exc.strerror
        raise StateError(
            f"cannot move the state store at {old} to {new}: {why}",
            hint=f"stop every rocky of this project and run: mv {old} {new}",
        ) from exc
    for suffix in _SIDE_FILES:
        side = old.with_name(old.name + suffix)
        if side.exists():
            try:
                os.rename(side, new.with_name(new.name + suffix))
            except OSError:
                # Empty after the checkpoint, so nothing is lost; SQLite creates fresh ones.
                _unlink_quietly(side)
    for directory in (*made, new.parent, old.parent):
        _fsync_directory(directory)


def _check_movable(old: Path, new: Path, project_dir: Path) -> None:
    if old.is_symlink():
        raise StateError(
            f"the state store at {old} (an older location) is a symlink; rocky does not move it",
            hint=f"move the file it points to: mv {os.path.realpath(old)} {new}, then remove the symlink",
        )
    root = Path(os.path.normpath(project_dir.absolute()))
    if not old.is_relative_to(root):
        raise StateError(
            f"the state store at {old} (where an older rocky kept it, beside a pipeline's models) is outside "
            f"the project directory {root} and may be shared with another project; rocky does not move it",
            hint=f"move it for this project (mv {old} {new}) or keep it with --state-path {old}",
        )


def _both(current: Path, legacy: Sequence[Path]) -> StateError:
    old = ", ".join(f"{p} ({_summary(p)})" for p in legacy)
    return StateError(
        f"this project has two state stores: {current} ({_summary(current)}), where rocky keeps it now, "
        f"and {old}, where an older rocky kept it; rocky will not merge them or pick one",
        hint=f"keep one and move the other away, e.g. mv {legacy[0]} {legacy[0]}.old to keep {current}",
    )


def _summary(path: Path) -> str:
    """A few words to choose between two stores by: how many runs, the newest one (read-only)."""
    if path.is_file() and path.stat().st_size == 0:
        return "an empty file"
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=1)
        try:
            count, newest = conn.execute("SELECT COUNT(*), MAX(run_id) FROM run_history").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return "unreadable"
    return "no runs" if not count else f"{count} run(s), newest {newest}"


def _make_parent(path: Path) -> list[Path]:
    """Create ``path``'s directory (``.rocky-state/`` of a namespace); returns the directories it changed."""
    parent = path.parent
    if parent.is_dir():
        return []
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"cannot create the state store directory {parent}: {exc}") from exc
    return [parent.parent]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
