"""The native scheduler: demand evaluation, claims, backoff, incidents, the webhook spool, the tick lock.

``Reconciler`` is the library both ``rocky tick`` and ``rocky serve --scheduler`` run; it takes an
injected clock and spawner. See ``docs/scheduling.md`` for the behaviour and CONTRACT section 6 for the
exact JSON. Names load lazily, so importing one submodule does not pay for the others (a quiet tick
stays cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.schedule.health import SchedulerHealth, scheduler_brief, scheduler_health
    from rocky_engine.schedule.plan import PipelinePlan, SchedulePlan, build_plan
    from rocky_engine.schedule.reconciler import Reconciler, ReconcilerOptions, tick_project
    from rocky_engine.schedule.spawner import ChildRequest, ChildResult, Spawner, SubprocessSpawner
    from rocky_engine.schedule.spool import Demand, SpoolError, SpoolWrite, list_demands, write_demand
    from rocky_engine.schedule.tick_lock import TickLock, TickLockInfo, inspect_tick_lock
    from rocky_engine.schedule.tick_output import TickOutput
    from rocky_engine.schedule.view import schedule_status

_EXPORTS: dict[str, str] = {
    "ChildRequest": "spawner",
    "ChildResult": "spawner",
    "Demand": "spool",
    "PipelinePlan": "plan",
    "Reconciler": "reconciler",
    "ReconcilerOptions": "reconciler",
    "SchedulePlan": "plan",
    "SchedulerHealth": "health",
    "Spawner": "spawner",
    "SpoolError": "spool",
    "SpoolWrite": "spool",
    "SubprocessSpawner": "spawner",
    "TickLock": "tick_lock",
    "TickLockInfo": "tick_lock",
    "TickOutput": "output",
    "build_plan": "plan",
    "inspect_tick_lock": "tick_lock",
    "list_demands": "spool",
    "scheduler_brief": "health",
    "scheduler_health": "health",
    "schedule_status": "view",
    "tick_project": "reconciler",
    "write_demand": "spool",
}

__all__ = [
    "ChildRequest",
    "ChildResult",
    "Demand",
    "PipelinePlan",
    "Reconciler",
    "ReconcilerOptions",
    "SchedulePlan",
    "SchedulerHealth",
    "Spawner",
    "SpoolError",
    "SpoolWrite",
    "SubprocessSpawner",
    "TickLock",
    "TickLockInfo",
    "TickOutput",
    "build_plan",
    "inspect_tick_lock",
    "list_demands",
    "schedule_status",
    "scheduler_brief",
    "scheduler_health",
    "tick_project",
    "write_demand",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rocky_engine.schedule' has no attribute '{name}'")
    return getattr(importlib.import_module(f"rocky_engine.schedule.{module}"), name)
