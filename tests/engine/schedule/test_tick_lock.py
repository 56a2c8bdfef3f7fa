"""The tick lock: skip while held, take over a wedged holder, probe without disturbing a tick."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rocky_engine.schedule.tick_lock import TickLock, inspect_tick_lock


def later(seconds: float):  # type: ignore[no-untyped-def]
    return lambda: time.time() + seconds


def test_second_acquirer_skips_while_the_heartbeat_is_fresh(tmp_path: Path) -> None:
    holder = TickLock(tmp_path)
    assert holder.acquire() == "acquired"
    try:
        other = TickLock(tmp_path, wall=later(299))
        assert other.acquire() == "in_progress"
        other.release()
        assert inspect_tick_lock(tmp_path).state == "held"
    finally:
        holder.release()
    assert inspect_tick_lock(tmp_path).state == "free"
    again = TickLock(tmp_path)
    assert again.acquire() == "acquired"
    again.release()


def test_stale_heartbeat_is_taken_over_and_the_takeover_blocks_others(tmp_path: Path) -> None:
    wedged = TickLock(tmp_path, heartbeat_interval=3600)
    assert wedged.acquire() == "acquired"
    try:
        info = inspect_tick_lock(tmp_path, wall=later(301))
        assert info.state == "wedged" and info.holder_pid == os.getpid()
        taker = TickLock(tmp_path, wall=later(301))
        assert taker.acquire() == "overridden" and taker.overridden_age is not None
        # while the taker ticks, its fresh heartbeat keeps a third tick out
        assert TickLock(tmp_path, wall=later(302)).acquire() == "in_progress"
        # and the probe still names the wedged holder (the flock is its), with its own heartbeat's age
        during = inspect_tick_lock(tmp_path, wall=later(302))
        assert during.state == "wedged" and during.overridden_at is not None
        assert during.heartbeat_age_seconds is not None and during.heartbeat_age_seconds > 300
        taker.release()
        # released: marked stale at once, so the next tick takes over without waiting 300 s
        nxt = TickLock(tmp_path)
        assert nxt.acquire() == "overridden"
        nxt.release()
    finally:
        wedged.release()


def test_heartbeat_thread_keeps_a_long_tick_fresh(tmp_path: Path) -> None:
    lock = TickLock(tmp_path, heartbeat_interval=0.05)
    lock.acquire()
    try:
        os.utime(lock.heartbeat_path, (0, 0))
        # the heartbeat thread stamps it again (waited for, not timed: a loaded machine may be slow to)
        deadline = time.monotonic() + 30
        while lock.heartbeat_path.stat().st_mtime == 0:
            assert time.monotonic() < deadline, "the heartbeat thread never refreshed the heartbeat"
            time.sleep(0.01)
        assert time.time() - lock.heartbeat_path.stat().st_mtime < 30
    finally:
        lock.release()


def test_never_before_the_first_tick(tmp_path: Path) -> None:
    assert inspect_tick_lock(tmp_path / ".rocky").state == "never"


HOLDER = """
import sys, time
from pathlib import Path
from rocky_engine.schedule.tick_lock import TickLock
lock = TickLock(Path(sys.argv[1]))
print(lock.acquire(), flush=True)
time.sleep(60)
"""


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "acquired"
        assert TickLock(tmp_path).acquire() == "in_progress"
        assert inspect_tick_lock(tmp_path).state == "held"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    # the kernel dropped the flock; the leftover heartbeat does not matter
    assert inspect_tick_lock(tmp_path).state == "free"
    lock = TickLock(tmp_path)
    assert lock.acquire() == "acquired"
    lock.release()


def test_an_older_release_after_override_names_no_exited_tick(tmp_path: Path) -> None:
    """A heartbeat an engine before ``wedged`` released after an override ({pid: <exited tick>, released},
    mtime 0) names no holder and no age from the epoch; an override then carries "unknown" forward."""
    wedged = TickLock(tmp_path, heartbeat_interval=3600)
    assert wedged.acquire() == "acquired"
    try:
        wedged.heartbeat_path.write_text('{"pid":999999,"released":true}')
        os.utime(wedged.heartbeat_path, (0, 0))
        info = inspect_tick_lock(tmp_path)
        assert (info.state, info.holder_pid, info.heartbeat_age_seconds) == ("wedged", None, None)
        taker = TickLock(tmp_path)
        assert taker.acquire() == "overridden" and taker.overridden_age is None
        assert taker.wedged is not None and taker.wedged.pid is None
        taker.release()
        info = inspect_tick_lock(tmp_path)
        assert (info.state, info.holder_pid, info.heartbeat_age_seconds) == ("wedged", None, None)
        assert info.overridden_at is not None
    finally:
        wedged.release()
