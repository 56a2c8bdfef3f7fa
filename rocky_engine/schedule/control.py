"""Operator control behind ``rocky state schedule spool`` (pause and resume: ``ops.schedule_hold``)."""

from __future__ import annotations

from pathlib import Path

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.schedule.spool import SpoolError, list_demands, spool_dir_of
from rocky_engine.wire.spool import SpoolResult


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
