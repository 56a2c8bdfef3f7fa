"""What went wrong with the state store, in words a person can act on: one ``StateError`` per failure.

SQLite reports a damaged file, a full disk and a busy lock with codes; Python reports a stored value that
no longer decodes (a corrupt timestamp, JSON or UTF-8 text) with whatever exception the decoder raises.
Every one of them reaches the user as a single line that names the store and says what to do:

- damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``, text that is not UTF-8, malformed JSON, a stored value
  that does not parse): restore a backup, or move the file aside and start a fresh store;
- a full disk (``SQLITE_FULL``, or an I/O error while the filesystem has no space left): "no space left
  on <directory>", never the "disk I/O error" SQLite says when it cannot grow its shared-memory file;
- busy (``SQLITE_BUSY``/``SQLITE_LOCKED`` after ``busy_timeout``): another process holds it, retry.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from rocky_engine.errors import StateDamagedError, StateError

BUSY_TIMEOUT_MS = 5000
CORRUPT_CODES = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})
BUSY_CODES = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})
READONLY_CODES = frozenset({"SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH"})
#: SQLite's words for stored text it cannot decode (the sqlite3 module's, and the JSON functions')
_DAMAGED_TEXT = ("Could not decode to UTF-8", "malformed JSON")
#: below this much free space an I/O error is taken to be the full disk it almost certainly is
_NEARLY_FULL_BYTES = 1 << 20


def sqlite_code(exc: sqlite3.Error) -> str:
    """The (primary or extended) SQLite error name, e.g. ``SQLITE_CORRUPT``; empty when there is none."""
    return str(getattr(exc, "sqlite_errorname", "") or "")


def damaged_store_error(path: Path, detail: str) -> StateDamagedError:
    """The one message of a store whose file or contents are damaged."""
    return StateDamagedError(
        f"state store at {path} is damaged: {printable(detail)}",
        hint=f"restore a backup of it, or move it aside (mv {path} {path}.corrupt) and rerun to start a "
        "fresh store (its watermarks and run history stay in the moved file)",
    )


def state_error(path: Path, exc: sqlite3.Error, action: str) -> StateError:
    """The ``StateError`` for a SQLite failure while ``action``-ing (open, read, write ...) the store."""
    code = sqlite_code(exc)
    if code in CORRUPT_CODES or any(words in str(exc) for words in _DAMAGED_TEXT):
        return damaged_store_error(path, f"SQLite cannot {action} it ({exc})")
    if code == "SQLITE_FULL" or (code.startswith("SQLITE_IOERR") and no_space_left(path)):
        return StateError(
            f"no space left on {path.parent} (the filesystem holding the state store {path}); "
            f"could not {action} it",
            hint="free space there, or keep the store elsewhere with --state-path, and rerun",
        )
    if code in BUSY_CODES:
        return StateError(
            f"state store at {path} stayed busy for {BUSY_TIMEOUT_MS // 1000} s ({exc})",
            hint="another process is holding it; retry when it finishes",
        )
    return StateError(f"state store at {path}: could not {action}: {printable(str(exc))}")


def no_space_left(path: Path) -> bool:
    """Whether the filesystem holding ``path`` is (all but) full: SQLite cannot even grow its WAL index."""
    try:
        stats = os.statvfs(path.parent)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < _NEARLY_FULL_BYTES


def printable(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut at ``limit``: a detail quoting a damaged cell (or pydantic's multi-line
    report) must not swamp the one-line error (RockyError escapes what is not printable)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
