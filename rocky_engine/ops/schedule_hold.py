"""``rocky state schedule pause|resume P``: the operator's hold on a pipeline's schedule.

A paused pipeline's declared demand is not evaluated (its cron anchor stays put, so ``catchup`` decides
what happens on resume) and its webhook demands stay queued until it is resumed. The command is
idempotent: pausing a paused pipeline (or resuming one that is not paused) changes nothing and says so
(``changed: false``), keeping since when the pipeline is held.
"""

from __future__ import annotations

from rocky_engine.output import Result
from rocky_engine.project import Project
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.wire.state import ScheduleHoldResult


class HoldOutput(ScheduleHoldResult, Result):
    """``rocky state schedule pause|resume P``, rendered."""

    def render_table(self) -> str:
        if self.paused and not self.changed:
            return (f"{self.pipeline} already paused since {self.paused_at} (nothing changed); "
                    "`rocky state schedule resume` ends it\n")
        if self.paused:
            return f"paused {self.pipeline} since {self.paused_at}; `rocky state schedule resume` ends it\n"
        if not self.changed:
            return (f"{self.pipeline} is not paused (nothing to resume); "
                    "the next tick evaluates its schedule\n")
        return f"resumed {self.pipeline}; the next tick evaluates its schedule\n"


def set_hold(project: Project, pipeline: str, *, paused: bool) -> HoldOutput:
    """Pause or resume ``pipeline`` (any configured pipeline; webhook demands honour the hold too).

    Raises:
        ConfigError: ``pipeline`` is not in the config.
        StateLockedError: a run or a tick holds the store; retry when it finishes.
    """
    from rocky_engine.state.schedule import ScheduleRepo
    from rocky_engine.state.store import StateStore

    project.config.pipeline(pipeline)
    path = project.state_path()
    with StateStore.open(path, writer=True) as store:
        row, changed = ScheduleRepo(store).hold(pipeline, paused, now_utc())
    return HoldOutput(
        action="pause" if paused else "resume",
        pipeline=pipeline,
        paused=row.paused,
        changed=changed,
        state_path=str(path),
        paused_at=rfc3339(row.paused_at) if row.paused_at else None,
    )
