"""Finding a process tree in ``/proc`` and waiting until none of it is alive.

"No descendant alive 2 s later" needs the descendants of a process that is about to die: once rocky is
killed its children are re-parented, so the tree is snapshotted while rocky lives, and processes born after
the snapshot are caught through the sessions of the snapshotted ones (every child program leads its own
session). A process counts by (pid, start time), so a recycled pid is never mistaken for a survivor, and a
zombie counts as dead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    #: clock ticks since boot (field 22 of /proc/PID/stat)
    start: int
    state: str


def _read(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0].decode())


def processes() -> list[Proc]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (proc := _read(int(name))) is not None:
            found.append(proc)
    return found


def descendants(root: int) -> list[Proc]:
    """Every live descendant of ``root`` right now."""
    table = processes()
    children: dict[int, list[Proc]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found: list[Proc] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child.pid)
    return found


def alive(procs: Iterable[Proc]) -> list[Proc]:
    """Those of ``procs`` that still run (same pid and start time, not a zombie)."""
    left = []
    for proc in procs:
        now = _read(proc.pid)
        if now is not None and now.start == proc.start and now.state != "Z":
            left.append(now)
    return left


def dead(pid: int) -> bool:
    """``pid`` is gone or a zombie (for a pid known to have been alive a moment ago)."""
    proc = _read(pid)
    return proc is None or proc.state == "Z"


def in_sessions(sessions: Iterable[int]) -> list[Proc]:
    wanted = set(sessions)
    return [p for p in processes() if p.sid in wanted and p.state != "Z"]


def child_sessions(tree: Iterable[Proc]) -> set[int]:
    """The sessions of ``tree`` other than this test process's own."""
    own = os.getsid(0)
    return {p.sid for p in tree if p.sid != own}


def survivors(tree: Iterable[Proc], sessions: Iterable[int] = ()) -> list[Proc]:
    tree, sessions = list(tree), set(sessions)
    left = {p.pid: p for p in alive(tree)}
    left.update({p.pid: p for p in in_sessions(sessions)})
    return sorted(left.values(), key=lambda p: p.pid)


def wait_gone(tree: Iterable[Proc], sessions: Iterable[int] = (), *, deadline: float) -> list[Proc]:
    """Poll until nothing of ``tree`` or ``sessions`` is alive or ``deadline`` (monotonic) passes; returns
    what is still alive (empty when everything is gone)."""
    tree, sessions = list(tree), set(sessions)
    until(lambda: not survivors(tree, sessions), deadline)
    return survivors(tree, sessions)


def until(predicate: Callable[[], bool], deadline: float) -> bool:
    """Poll ``predicate`` every 20 ms until it holds (True) or ``deadline`` (monotonic) passes (False);
    it is always looked at at least once."""
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def pids_in(directory: Path) -> list[int]:
    """The pids programs wrote into ``directory``, one file each."""
    return sorted(int(p.read_text()) for p in directory.iterdir() if not p.name.endswith(".partial"))


def wait_for_file(path: Path, timeout: float = 60.0) -> str:
    """Poll until ``path`` exists with content; returns it."""
    end = time.monotonic() + timeout
    while not (path.exists() and (text := path.read_text())):
        if time.monotonic() >= end:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.02)
    return text


def sleeping_hook(pids: Path, seconds: int = 300, event: str = "pipeline_start") -> str:
    """A ``[[hook.on_EVENT]]`` whose shell starts ``sleep SECONDS``, writes the pids of both into ``pids``
    (files ``sh`` then ``sleep``, each complete when it appears) and waits for the sleep."""
    note = "echo {pid} > {d}/{name}.partial && mv {d}/{name}.partial {d}/{name}"
    command = "; ".join([
        note.format(pid="$$", d=pids, name="sh"),
        f"sleep {seconds} & " + note.format(pid="$!", d=pids, name="sleep"),
        "wait",
    ])
    return f"\n[[hook.on_{event}]]\ncommand = '{command}'\ntimeout_ms = {(seconds + 60) * 1000}\n"


def wait_for_hook(pids: Path, timeout: float = 60.0) -> list[int]:
    """The pids of a :func:`sleeping_hook` once both are written."""
    return [int(wait_for_file(pids / name, timeout)) for name in ("sh", "sleep")]
