"""Who holds a claim, and whether that process is provably dead (issue 13 item 11).

A claim (an idempotency key in flight) records its holder as ``host``, ``pid`` and the process's start
time (field 22 of ``/proc/<pid>/stat``, clock ticks since boot), so a later run on the same host can tell
"still running" from "killed with kill -9" without waiting out the claim's TTL. A pid alone is not enough:
pids are reused, and a reused pid is a different process whose start time differs.

"Provably dead" is deliberately narrow: the holder ran on this host and its pid is gone, a zombie, or
belongs to a process that started at another time. Another host, no ``/proc``, or a record without a
start time proves nothing, and the claim is left to its TTL.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    #: clock ticks since boot when the process started; None where ``/proc`` does not tell
    start: int | None

    def encode(self) -> str:
        return json.dumps({"host": self.host, "pid": self.pid, "start": self.start}, sort_keys=True)

    @classmethod
    def decode(cls, text: str | None) -> Holder | None:
        """The holder a claim recorded; None for a claim written without one (or unreadable)."""
        if not text:
            return None
        try:
            doc = json.loads(text)
            start = doc.get("start")
            return cls(str(doc["host"]), int(doc["pid"]), None if start is None else int(start))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


def this_process() -> Holder:
    """The holder this process records in the claims it takes."""
    pid = os.getpid()
    return Holder(socket.gethostname(), pid, _start_time(pid))


def provably_dead(holder: Holder) -> bool:
    """True only when ``holder`` ran on this host and is not running any more (see the module doc)."""
    if holder.host != socket.gethostname() or holder.start is None:
        return False
    if holder.pid == os.getpid():
        return False
    try:
        with open(f"/proc/{holder.pid}/stat", "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return os.path.isdir("/proc/self")  # no such process (where /proc exists to say so)
    except OSError:
        return False
    fields = data[data.rfind(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):
        return True  # exited; its parent has not reaped it yet
    return int(fields[19]) != holder.start  # the pid now belongs to another process


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2:].split()[19])
