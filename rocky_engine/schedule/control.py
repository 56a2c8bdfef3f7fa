"""Operator controls behind ``rocky state schedule pause|resume P`` and ``rocky state schedule spool``.

Pause is an operator hold: a paused pipeline's declared demand is not evaluated (its cron anchor stays put,
so ``catchup`` decides what happens on resume) and its webhook demands stay queued until it is resumed.
"""

from __future__ import annotations

from pathlib import Path

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.project import Project
from rocky_engine.schedule.spool import SpoolError, list_demands, spool_dir_of
from rocky_engine.state._time import now_utc, rfc3339
from rocky_engine.wire.spool import SpoolResult
from rocky_engine.wire.state import PauseResult


class PauseOutput(PauseResult, Result):
    """``rocky state schedule pause|resume P``, rendered."""

    def render_table(self) -> str:
        if self.paused:
            return f"paused {self.pipeline} since {self.paused_at}; `rocky state schedule resume` ends it\n"
        return f"resumed {self.pipeline}; the next tick evaluates its schedule\n"


def set_paused(project: Project, pipeline: str, paused: bool) -> PauseOutput:
    """Pause or resume ``pipeline`` (any configured pipeline; webhook demands honour the hold too).

    Raises:
        ConfigError: ``pipeline`` is not in the config.
        StateLockedError: a run or a tick holds the store; retry when it finishes.
    """
    from rocky_engine.state.schedule import ScheduleRepo
    from rocky_engine.state.store import StateStore

    project.config.pipeline(pipeline)
    now = now_utc()
    with StateStore.open(project.state_path(), writer=True) as store:
        row = ScheduleRepo(store).set_paused(pipeline, paused, now)
    return PauseOutput(
        action="pause" if paused else "resume",
        pipeline=pipeline,
        paused=row.paused,
        paused_at=rfc3339(row.paused_at) if row.paused_at else None,
    )


class SpoolOutput(SpoolResult, Result):
    """``rocky state schedule spool``: accepted, unconsumed demands, rendered."""

    def _grid(self) -> tuple[list[str], list[list[str]]]:
        return (
            ["ACCEPTED", "PIPELINE", "DEMAND", "DELIVERY"],
            [[d.accepted_at, d.pipeline, d.demand_uid, d.delivery_id or ""] for d in self.demands],
        )

    def render_table(self) -> str:
        if not self.demands:
            return f"no webhook demands waiting in {self.spool}\n"
        return render_rows(None, *self._grid())

    def render_md(self) -> str:
        if not self.demands:
            return "_no webhook demands waiting_\n"
        return md_table(*self._grid())


def spool_listing(dot_rocky: Path) -> SpoolOutput:
    """The queue as the next tick will see it.

    Raises:
        SpoolError: the spool (or a demand in it) cannot be read: "we cannot tell" is not "empty".
    """
    spool = spool_dir_of(dot_rocky)
    listing = list_demands(spool)
    if listing.errors:
        raise SpoolError(
            "; ".join(listing.errors),
            hint="fix the permissions or the dangling link; the next tick exits 1 until then",
        )
    return SpoolOutput.of(str(spool), [d.entry() for d in listing.demands])
