"""``build_rocky_schedule``: a thin convenience over ``dg.ScheduleDefinition`` with the Rocky run tag."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

#: run tag carried by every run a Rocky schedule starts (filter the run history on it)
SCHEDULE_TAG = "rocky/schedule"


def build_rocky_schedule(
    *,
    name: str,
    cron_schedule: str,
    target: dg.AssetsDefinition | dg.AssetSelection | str | list[str] | list[dg.AssetKey] | object,
    timezone: str = "UTC",
    tags: Mapping[str, str] | None = None,
    description: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> dg.ScheduleDefinition:
    """A schedule that materializes ``target`` at ``cron_schedule`` in ``timezone``.

    Every run gets ``rocky/schedule=<name>``; ``tags`` merge on top, so a caller's own
    ``rocky/schedule`` wins (deliberately).
    """
    run_tags = {SCHEDULE_TAG: name, **(tags or {})}
    return dg.ScheduleDefinition(
        name=name,
        cron_schedule=cron_schedule,
        target=target,  # type: ignore[arg-type]
        execution_timezone=timezone,
        tags=run_tags,
        description=description,
        default_status=default_status,
    )
