"""The ``pipelines`` array of ``GET /api/v1/schedule``, rendered once and reused while nothing it shows
changed.

Over 1,000 pipelines, decoding the stored cursor rows, building the entries and writing their JSON cost
~20 ms per request, while between two ticks none of it changes. An entry depends on, and a rendering is
kept only while all of these stay the same:

- the project and its plan (``ProjectHolder`` keeps one plan per loaded rocky.toml), which fix the
  schedules and every ``config_error`` that does not read a file;
- the freshness budgets that read model files (``plan.resolution_reads_files``): resolved again on every
  request, so an edited sidecar shows at once, as it did before the cache;
- the stored rows, compared undecoded with the rows rendered (a tick, a pause or a failure changes them);
- the time, through the throttle alone: a backoff a row earned is shown until its ``resume_at``, so a
  rendering holds while ``now`` stays between the two resume instants that bracket the one it was made at;
- the secrets the process knows (the text is kept redacted).

One rendering is kept: the server serves one project, and every request asks the same question.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rocky_engine.redact import Redactor, known
from rocky_engine.schedule.backoff import earned_backoff
from rocky_engine.schedule.plan import PipelinePlan, Resolution, SchedulePlan, resolution_reads_files
from rocky_engine.schedule.view import resolver_of, scheduled_pipelines
from rocky_engine.state._time import utc
from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.wire.schedule import ScheduledPipeline

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.store import StateStore

_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PipelinesRendering:
    """The entries of one rendering, and their JSON as the document's top level writes the array."""

    entries: list[ScheduledPipeline]
    #: ``json.dumps(entries, indent=2)`` with every line after the first indented one level more
    text: str


@dataclass(frozen=True)
class _Kept:
    project: Project
    plan: SchedulePlan
    redactor: Redactor
    stored: list[tuple[Any, ...]]
    read_files: dict[str, Resolution]
    #: ``now`` in ``[since, until)`` shows the same throttles
    since: datetime
    until: datetime
    rendering: PipelinesRendering


class PipelinesCache:
    """The last rendering of the schedule's pipelines (thread-safe; requests run in a thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: _Kept | None = None
        self._static: tuple[Project, SchedulePlan, dict[str, Resolution]] | None = None
        #: renderings made so far (what the tests pin: a repeated read renders nothing)
        self.renders = 0
        #: schedules resolved so far, file-reading ones included
        self.resolutions = 0

    def pipelines(
        self, project: Project, plan: SchedulePlan, store: StateStore, now: datetime
    ) -> PipelinesRendering:
        """The pipelines of the schedule document at ``now``, rendered again only when something they show
        changed (see the module docstring).

        Raises:
            StateError: the store cannot be read, or a row does not decode.
        """
        now = utc(now)
        repo = ScheduleRepo(store)
        stored = repo.stored()
        with self._lock:
            static = self._static_resolutions(project, plan)
            read_files = {
                pp.name: self._resolve(project, pp) for pp in plan.scheduled if resolution_reads_files(pp)
            }
            kept = self._kept
            redactor = known()
            if (
                kept is not None and kept.project is project and kept.plan is plan
                and kept.redactor is redactor and kept.since <= now < kept.until
                and kept.read_files == read_files and kept.stored == stored
            ):
                return kept.rendering
            rows = repo.decode(stored)
            entries = scheduled_pipelines(
                plan, rows, now, lambda pp: read_files[pp.name] if pp.name in read_files else static[pp.name]
            )
            data = redactor.deep([entry.wire() for entry in entries])
            # JSON strings hold no raw newline, so every newline starts a line to indent
            text = json.dumps(data, indent=2, default=str).replace("\n", "\n  ")
            rendering = PipelinesRendering(entries, text)
            resumes = [
                b.resume_at for b in (
                    earned_backoff(r.last_outcome, r.consecutive_failures, r.last_attempt_at)
                    for r in rows.values()
                ) if b is not None
            ]
            self._kept = _Kept(
                project, plan, redactor, stored, read_files,
                since=max((t for t in resumes if t <= now), default=_EARLIEST),
                until=min((t for t in resumes if t > now), default=_LATEST),
                rendering=rendering,
            )
            self.renders += 1
            return rendering

    def _resolve(self, project: Project, pp: PipelinePlan) -> Resolution:
        self.resolutions += 1
        return resolver_of(project)(pp)

    def _static_resolutions(self, project: Project, plan: SchedulePlan) -> dict[str, Resolution]:
        """Each schedule's resolution that reads no file, made once per loaded plan."""
        if self._static is None or self._static[0] is not project or self._static[1] is not plan:
            self._static = (project, plan, {
                pp.name: self._resolve(project, pp) for pp in plan.scheduled if not resolution_reads_files(pp)
            })
        return self._static[2]
