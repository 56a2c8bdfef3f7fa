"""The state a replication run leaves as it goes: progress rows and new watermarks, written in batches.

Each finished table's progress row and, on success, its new watermark are written in one transaction,
batched every ``PROGRESS_FLUSH_SECONDS`` and at the end, so a run killed midway leaves the tables it
finished resumable and a watermark never moves without its progress row.

Inside one warehouse a copy does not read its new watermark (``MAX(ts)`` of the target) itself: the
tables are read in batches of ``MARK_BATCH``, one ``UNION ALL`` statement each
(``copy_sql.read_watermarks``), on a background thread with the run's main session, which is idle while
the workers copy. The scheduling thread never waits for such a read, so no worker waits for its next
table meanwhile; a flush waits for the reads of the rows it writes (a table's progress row is held until
its watermark is known). A target whose watermark cannot be read keeps its stored one and is logged:
its next copy starts after the target's own ``MAX(ts)`` anyway (the copy's guard).

Such a table's run events (its materialization with the watermark, then its checks) wait for the read
too: ``copied(..., then=...)`` runs ``then`` on the reader thread as soon as the watermark is known (or
could not be read), so a streamed materialization carries the same watermark as the run document. A
table whose events someone waits for starts a read at once when none is under way; the tables copied
meanwhile join the next read, started when that one ends, so reads stay batched while events never wait
for another table to finish (they used to wait for the next flush, i.e. for the next table a worker
finished: a fast table's materialization reached Dagster only when a slow one ended).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.replication.copy_sql import CopySpec, read_watermarks
from rocky_engine.state.progress import ProgressEntry

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseSession
    from rocky_engine.run.context import RunContext
    from rocky_engine.wire.run import MaterializationMetadata

PROGRESS_FLUSH_SECONDS = 0.25
#: copied tables whose watermarks are read in one statement as soon as that many are waiting
MARK_BATCH = 32


@dataclass
class _Unread:
    entry: ProgressEntry
    spec: CopySpec
    #: the table's run output, completed with the watermark once read
    meta: MaterializationMetadata
    #: what waits for the watermark (the table's run events)
    then: Callable[[], None] | None = None


class ProgressBook:
    """Progress rows and watermarks of one run's finished tables, on their way to the state store."""

    def __init__(self, ctx: RunContext, mark_session: WarehouseSession | None) -> None:
        self.ctx = ctx
        self._mark_session = mark_session
        self._ready: list[ProgressEntry] = []
        self._ready_marks: dict[str, str] = {}
        self._unread: list[_Unread] = []
        self._reads: list[Future[list[tuple[_Unread, str | None, str | None]]]] = []
        self._reader: ThreadPoolExecutor | None = None
        #: reads submitted and not finished; ``_unread`` and ``_reads`` are shared with the reader thread
        self._reading = 0
        self._lock = threading.Lock()
        self._last_flush = time.perf_counter()

    def finished(self, entry: ProgressEntry, watermark: str | None = None) -> None:
        """A table whose progress row (and watermark, if any) can be written as they are."""
        self._ready.append(entry)
        if watermark is not None:
            self._ready_marks[entry.key] = watermark

    def copied(self, entry: ProgressEntry, spec: CopySpec, meta: MaterializationMetadata,
               then: Callable[[], None] | None = None) -> None:
        """A table copied inside one warehouse whose watermark is still to be read; ``then`` runs once
        ``meta.watermark`` is set (or could not be read)."""
        assert self._mark_session is not None, "a deferred watermark needs a session to read it"
        with self._lock:
            self._unread.append(_Unread(entry, spec, meta, then))
            if len(self._unread) >= MARK_BATCH or (then is not None and not self._reading):
                self._submit()

    def flush(self, *, force: bool = False) -> None:
        """Write what is ready in one transaction: at most every ``PROGRESS_FLUSH_SECONDS``, or now."""
        if not force and time.perf_counter() - self._last_flush < PROGRESS_FLUSH_SECONDS:
            return
        while True:
            with self._lock:
                self._submit()
                reads, self._reads = self._reads, []
            if not reads:
                break
            # a read may have started the next one before it ended: the loop collects that one too
            for read in reads:
                self._apply(read.result())
        if not self._ready:
            return
        ctx = self.ctx
        entries, marks = self._ready, self._ready_marks
        self._ready, self._ready_marks = [], {}
        with ctx.store.transaction():
            now = ctx.clock()
            ctx.store.progress.record_many(ctx.run_id, entries, pipeline=ctx.pipeline_name, now=now)
            ctx.store.watermarks.set_many(marks, now=now)
        self._last_flush = time.perf_counter()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None

    def _submit(self) -> None:
        """Start a read of every unread table (the caller holds ``_lock``)."""
        if not self._unread or self._mark_session is None:
            return
        batch, self._unread = self._unread, []
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocky-marks")
        self._reading += 1
        self._reads.append(self._reader.submit(self._read_and_announce, self._mark_session, batch))

    def _read_and_announce(
        self, session: WarehouseSession, batch: list[_Unread]
    ) -> list[tuple[_Unread, str | None, str | None]]:
        """The reader thread: read the batch, run its tables' events, start the next read if one waits."""
        try:
            results = _read(session, batch)
            for item, value, error in results:
                if error is None:
                    item.meta.watermark = value
                if item.then is not None:
                    item.then()
            return results
        finally:
            with self._lock:
                self._reading -= 1
                if any(item.then is not None for item in self._unread):
                    self._submit()

    def _apply(self, results: list[tuple[_Unread, str | None, str | None]]) -> None:
        for item, value, error in results:
            self._ready.append(item.entry)
            if error is None and value is not None:
                self._ready_marks[item.entry.key] = value
            if error is None:
                continue
            self.ctx.log.warning(
                "table %s was copied but its new watermark could not be read (%s); its stored watermark "
                "stays, and its next copy starts after the target's own MAX(%s)", item.entry.key, error,
                item.spec.ts)


def _read(session: WarehouseSession, batch: list[_Unread]) -> list[tuple[_Unread, str | None, str | None]]:
    """(item, watermark, error) of every item; runs on the reader thread."""
    reads = read_watermarks(session, [item.spec for item in batch])
    out: list[tuple[_Unread, str | None, str | None]] = []
    for item in batch:
        rel = item.spec.target_rel
        if rel in reads.marks:
            out.append((item, reads.marks[rel], None))
        else:
            out.append((item, None, str(reads.errors.get(rel, "no result"))))
    return out
