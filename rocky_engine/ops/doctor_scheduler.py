"""``rocky doctor``'s ``scheduler`` check: is the reconciler alive and unwedged?

It reads only the filesystem and the state store, never the warehouse, so it works offline and covers both
``rocky tick`` timers and ``rocky serve --scheduler``:

- Critical: ``.rocky/tick.lock`` is held and ``.rocky/tick.lock.heartbeat`` is older than 300 s (a wedged
  reconciler: restart the process that holds the lock).
- Warning: no tick has evaluated any schedule for more than twice the shortest cron interval (the timer
  looks dead), or none ever has.

When the scheduler package provides ``rocky_engine.schedule.health.scheduler_health(project, now)`` that
is the authority; the file-based check below is the fallback for builds without it.
"""

from __future__ import annotations

import fcntl
import importlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rocky_engine.errors import StateError
from rocky_engine.ops.doctor import Finding, Status
from rocky_engine.project import Project

#: a held tick lock whose heartbeat is older than this is wedged (CONTRACT section 6)
STALE_HEARTBEAT_SECONDS = 300


def check_scheduler(project: Project, store_file: Path, now: datetime | None) -> Finding:
    moment = now or datetime.now(UTC)
    scheduled = {n: p.schedule for n, p in project.config.pipelines.items() if p.schedule is not None}
    if not scheduled:
        return Finding("healthy", "no pipeline declares a [schedule]; nothing to check")
    provided = _provided_health()
    if provided is not None:
        return _coerce(provided(project, moment))
    return fallback_scheduler_check(project, store_file, moment)


def _provided_health() -> Any:
    try:
        module = importlib.import_module("rocky_engine.schedule.health")
    except ModuleNotFoundError as exc:
        if exc.name not in ("rocky_engine.schedule.health", "rocky_engine.schedule"):
            raise
        return None
    return getattr(module, "scheduler_health", None)


def _coerce(result: Any) -> Finding:
    """Accept the scheduler's own health object: a Finding-like object, a mapping, or (status, message)."""
    if isinstance(result, Finding):
        return result
    if isinstance(result, tuple) and len(result) >= 2:
        return Finding(_status(result[0]), str(result[1]))
    if isinstance(result, Mapping):
        single = result.get("suggestion")
        suggestions = result.get("suggestions") or ([single] if single else [])
        return Finding(_status(result.get("status")), str(result.get("message", "")), tuple(suggestions))
    suggestions = getattr(result, "suggestions", None) or (
        [result.suggestion] if getattr(result, "suggestion", None) else []
    )
    return Finding(_status(getattr(result, "status", None)), str(getattr(result, "message", "")),
                   tuple(str(s) for s in suggestions))


def _status(value: Any) -> Status:
    text = str(getattr(value, "value", value)).lower()
    if text in ("critical", "warning", "healthy"):
        return text  # type: ignore[return-value]
    return "healthy" if text in ("ok", "pass", "passed") else "warning"


def fallback_scheduler_check(project: Project, store_file: Path, now: datetime) -> Finding:
    """The scheduler check from the files alone (tick lock, heartbeat, schedule_state)."""
    lock = project.dot_rocky / "tick.lock"
    held, age = _probe_tick_lock(project.dot_rocky, now)
    if held and (age is None or age > STALE_HEARTBEAT_SECONDS):
        seen = "has no heartbeat" if age is None else f"heartbeat is {int(age)} s old"
        return Finding(
            "critical",
            f"{lock} is held and its {seen} (over {STALE_HEARTBEAT_SECONDS} s): the reconciler is wedged",
            ("restart the process holding .rocky/tick.lock (the rocky tick timer or rocky serve "
             "--scheduler); set timeout_minutes on long schedules",),
        )
    last = _last_evaluated(store_file)
    interval = shortest_cron_interval(project, now)
    paused = _paused(store_file)
    tail = f"; paused: {', '.join(paused)}" if paused else ""
    if last is None:
        if held:
            return Finding("healthy", f"the first tick is in progress{tail}")
        return Finding(
            "warning", f"no tick has evaluated any schedule yet{tail}",
            ("install the one-minute `rocky tick` timer or run `rocky serve --scheduler`",),
        )
    since = (now - last).total_seconds()
    state = "a tick is in progress" if held else "tick lock free"
    if interval is not None and since > 2 * interval:
        return Finding(
            "warning",
            f"no tick has evaluated any schedule for {int(since)} s, over twice the shortest cron interval "
            f"({int(interval)} s): the timer looks dead{tail}",
            ("check the timer that runs `rocky tick` (systemctl list-timers, crontab -l) or the "
             "`rocky serve --scheduler` process",),
        )
    return Finding("healthy", f"{state}; last tick evaluated {int(since)} s ago{tail}")


def _probe_tick_lock(dot_rocky: Path, now: datetime) -> tuple[bool, float | None]:
    """(held, heartbeat age in seconds). The scheduler's own probe is preferred: it takes the heartbeat
    mutex first, so probing never makes a real tick skip."""
    try:
        from rocky_engine.schedule.tick_lock import inspect_tick_lock
    except ImportError:
        held = _lock_held(dot_rocky / "tick.lock")
        return held, _age_seconds(dot_rocky / "tick.lock.heartbeat", now) if held else None
    info = inspect_tick_lock(dot_rocky, stale_after=STALE_HEARTBEAT_SECONDS, wall=now.timestamp)
    return info.state in ("held", "wedged"), info.heartbeat_age_seconds


def _lock_held(lock: Path) -> bool:
    """Whether another process holds the tick lock (a non-blocking try, released at once)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _age_seconds(path: Path, now: datetime) -> float | None:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return max(0.0, now.timestamp() - mtime)


def _last_evaluated(store_file: Path) -> datetime | None:
    from rocky_engine.state._time import from_db
    from rocky_engine.state.store import StateStore

    try:
        with StateStore.open(store_file, writer=False) as store:
            rows = store.query("SELECT MAX(last_evaluated_at) FROM schedule_state")
    except StateError:
        return None
    value = rows[0][0] if rows else None
    return from_db(str(value)) if value else None


def _paused(store_file: Path) -> list[str]:
    from rocky_engine.state.store import StateStore

    try:
        with StateStore.open(store_file, writer=False) as store:
            rows = store.query("SELECT pipeline FROM schedule_state WHERE paused = 1 ORDER BY pipeline")
    except StateError:
        return []
    return [str(r[0]) for r in rows]


def shortest_cron_interval(project: Project, now: datetime) -> float | None:
    """Seconds between the next two occurrences of the most frequent enabled cron (None: no cron)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from croniter import croniter

    best: float | None = None
    for name, pipeline in project.config.pipelines.items():
        schedule = pipeline.schedule
        if schedule is None or not schedule.cron or not schedule.enabled:
            continue
        try:
            tz = ZoneInfo(project.config.pipeline_timezone(name))
            it = croniter(schedule.cron, now.astimezone(tz))
            first = it.get_next(datetime)
            second = it.get_next(datetime)
        except (ValueError, KeyError, ZoneInfoNotFoundError):
            continue  # an invalid cron is reported by the config check
        gap = (second - first) / timedelta(seconds=1)
        best = gap if best is None else min(best, gap)
    return best
