"""Who holds the state store's writer lock: the holder writes its pid, command and start time into the
lock file once it has the ``flock``, so a second writer that meets the lock can name it in its error
("locked by pid 4242 on etl-1 (rocky run), since 2026-12-02T05:20:01Z") instead of only saying "busy".

The record is advisory: the ``flock`` is the lock. A record left by a process that died is overwritten by
the next holder; a reader that finds no record (a holder of an older engine) says "unknown".
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

#: The command line in the record is cut here (it names the command, it is not a full audit).
_MAX_COMMAND = 120
#: What this process records as its command; the CLI names it (never the raw argv, which may carry values
#: nobody should read back from a lock file).
_command = "rocky"


def name_command(command: str, subject: str | None = None) -> None:
    """Set the command this process records: ``rocky run`` plus the pipeline or connector it works on."""
    global _command
    _command = " ".join(w for w in ("rocky", command, subject) if w)[:_MAX_COMMAND]


def write_holder(fd: int) -> None:
    """Record this process as the holder of the lock ``fd`` (just taken); failures are ignored."""
    import socket

    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": _command,
                         "since": since}).encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, record + b"\n", 0)
    except OSError:
        pass  # a read-only lock file: the lock still holds, only the error names "unknown"


def describe_holder(lock_file: Path) -> str:
    """``pid 4242 on etl-1 (rocky run), since 2026-12-02T05:20:01Z``, or ``an unknown process``."""
    try:
        raw = lock_file.read_text(encoding="utf-8", errors="replace").strip()
        record = json.loads(raw) if raw else None
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "an unknown process"
    command = str(record.get("command") or "?").replace("\n", " ")[:_MAX_COMMAND]
    since = str(record.get("since") or "?")[:40]
    host = str(record.get("host") or "?").replace("\n", " ")[:80]
    return f"pid {record['pid']} on {host} ({command}), since {since}"
