"""``rocky doctor``'s ``scheduler`` check: is the reconciler alive and unwedged?

It reads only the filesystem and the state store, never the warehouse, so it works offline and covers both
``rocky tick`` timers and ``rocky serve --scheduler``. The verdict comes from the scheduler package
(``rocky_engine.schedule.health``), the one place that knows the tick lock and the schedule tables:

- Critical: ``.rocky/tick.lock`` is held and its heartbeat is older than 300 s (a wedged reconciler).
- Warning: no tick has evaluated any schedule for more than twice the shortest cron interval.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rocky_engine.ops.doctor_finding import Finding
from rocky_engine.project import Project


def check_scheduler(project: Project, store_file: Path, now: datetime | None) -> Finding:
    """The scheduler finding for ``project`` at ``now`` (``store_file`` is the store doctor opened)."""
    from rocky_engine.schedule.health import scheduler_health

    health = scheduler_health(project, now or datetime.now(UTC))
    if not health.applicable:
        return Finding("healthy", "no pipeline declares a [schedule]; nothing to check")
    return Finding(health.status, health.message, tuple(health.suggestions))
