"""One mutation at a time inside a server: an API run or a scheduler tick, never both.

The state store allows one writer, and the child of a run is that writer for as long as it runs. The gate
keeps the server's own mutations from racing each other for it: whoever arrives second does not wait, an
API request gets ``409 mutation_in_progress`` naming the job that holds the gate, and the scheduler skips
its tick and re-evaluates at the next poll. (Another *process* holding the store is caught by the store's
own writer lock.)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

HolderKind = Literal["job", "scheduler"]


@dataclass(frozen=True)
class Holder:
    """Who holds the gate: an API job, or the scheduler (with the job of the child it runs, if any)."""

    kind: HolderKind
    job_id: str | None = None


class MutationGate:
    """A non-blocking mutex that remembers its holder."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self._holder: Holder | None = None

    def try_acquire(self, kind: HolderKind, job_id: str | None = None) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        with self._state:
            self._holder = Holder(kind, job_id)
        return True

    def release(self) -> None:
        with self._state:
            self._holder = None
        self._lock.release()

    def set_job(self, job_id: str | None) -> None:
        """The holder names the job it is running now (the scheduler's child), or none."""
        with self._state:
            if self._holder is not None:
                self._holder = Holder(self._holder.kind, job_id)

    def holder(self) -> Holder | None:
        with self._state:
            return self._holder

    @property
    def busy(self) -> bool:
        return self._lock.locked()
