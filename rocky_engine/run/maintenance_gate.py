"""When concurrent work may start: the pause for warehouse maintenance shared by the transformation
DAG executor and the replication table pool.

A scheduler asks :meth:`MaintenanceGate.open` before it starts each task. Once the warehouse's
maintenance is due the gate closes: nothing new starts, and when the last running task has finished
the maintenance runs (every session idle) and the gate opens again.
"""

from __future__ import annotations

from rocky_engine.adapters.base import Maintenance


class MaintenanceGate:
    """Holds new tasks back while ``maintenance`` is due; a gate without maintenance is always open."""

    __slots__ = ("_holding", "_maintenance")

    def __init__(self, maintenance: Maintenance | None) -> None:
        self._maintenance = maintenance
        self._holding = False

    def open(self, running: int) -> bool:
        """May a task start now, with ``running`` tasks in flight? Runs the maintenance when it is due
        and nothing runs (the caller has checked that the run is not stopping)."""
        maintenance = self._maintenance
        if maintenance is None:
            return True
        if not self._holding:
            self._holding = maintenance.due()
        if self._holding and running == 0:
            maintenance.run()  # afterwards due() is False until more is written (the protocol's promise)
            self._holding = False
        return not self._holding
