"""Incident bundles: one JSON file of facts per scheduled run that finalized as a failure or a partial.

``.rocky/incidents/<YYYYMMDDTHHMMSSZ>-<pipeline>-<shortid>.json`` holds the document
``rocky_engine.wire.incident.IncidentDocument``. A fact the writer cannot know (the exit code of a run
recovered from a crashed owner) is ``null``, never a guessed zero.

Files are written atomically (temp file, fsync, rename, directory fsync) through a directory descriptor
opened with ``O_NOFOLLOW``, so a symlinked incidents directory is refused rather than written through.
Retention keeps the newest 50 and deletes only files whose names this writer produces.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rocky_engine.errors import StateError
from rocky_engine.logs import get_logger
from rocky_engine.output import redacted_document_text
from rocky_engine.state._time import rfc3339, utc
from rocky_engine.wire.incident import IncidentDocument, IncidentPointer

KEEP_NEWEST = 50
INCIDENTS_DIR = "incidents"
_NAME = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_-]+-[0-9a-f]{8}\.json$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

log = get_logger("schedule")


class IncidentDirRefused(StateError):
    """The incidents directory is a symlink or not a directory; nothing is written through it."""


@dataclass(frozen=True)
class IncidentBundle:
    """The facts of one incident (serialised as the bundle JSON)."""

    recorded_at: datetime
    pipeline: str
    source: str
    outcome: str
    logical_ts: datetime | None
    submission_id: str
    exit_code: int | None
    attempts: int | None
    consecutive_failures: int | None
    pointers: list[IncidentPointer] = field(default_factory=list)

    def document(self) -> IncidentDocument:
        return IncidentDocument(
            recorded_at=rfc3339(self.recorded_at), pipeline=self.pipeline, source=self.source,
            outcome=self.outcome, logical_ts=rfc3339(self.logical_ts) if self.logical_ts else None,
            submission_id=self.submission_id, exit_code=self.exit_code, attempts=self.attempts,
            consecutive_failures=self.consecutive_failures, pointers=self.pointers,
        )


def incident_file_name(recorded_at: datetime, pipeline: str, submission_id: str) -> str:
    short = (re.sub(r"[^0-9a-f]", "", submission_id.lower()) + "0" * 8)[:8]
    return f"{utc(recorded_at):%Y%m%dT%H%M%SZ}-{_UNSAFE.sub('_', pipeline) or '_'}-{short}.json"


def pointers_for(
    *, config_path: Path, submission_id: str, since: datetime, resident: bool, run_id: str | None = None
) -> list[IncidentPointer]:
    """Where to look next: a ``rocky history`` command, and the server endpoints under ``serve``."""
    pointers = [
        IncidentPointer(
            kind="history",
            command=f"rocky -c {config_path} history --since {utc(since):%Y-%m-%d}",
            match=f"submission_id={submission_id}",
        )
    ]
    if run_id:
        pointers.append(IncidentPointer(kind="run", run_id=run_id))
    if resident:
        pointers.append(IncidentPointer(kind="job", url=f"/api/v1/jobs/{submission_id}"))
        pointers.append(IncidentPointer(kind="schedule", url="/api/v1/schedule"))
    return pointers


def _open_dir(directory: Path, create: bool) -> int:
    if create:
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            pass  # an existing directory (or a symlink, refused below)
        except OSError as exc:
            raise IncidentDirRefused(f"cannot create the incidents directory {directory}: {exc}") from exc
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if directory.is_symlink():
            raise IncidentDirRefused(
                f"refusing to write incident bundles through the symlink {directory}",
                hint="replace it with a real directory (incident files stay on the project's volume)",
            ) from exc
        raise IncidentDirRefused(f"cannot open the incidents directory {directory}: {exc}") from exc
    return fd


def write_incident(directory: Path, bundle: IncidentBundle, *, keep: int = KEEP_NEWEST) -> Path:
    """Write ``bundle`` durably into ``directory`` and prune to the newest ``keep``; returns the path.

    Raises:
        IncidentDirRefused: the directory is a symlink, not a directory, or cannot be written.
    """
    name = incident_file_name(bundle.recorded_at, bundle.pipeline, bundle.submission_id)
    data = redacted_document_text(bundle.document()).encode()
    dfd = _open_dir(directory, create=True)
    try:
        tmp = f".tmp-{os.getpid()}-{name}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644, dir_fd=dfd)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
        except OSError as exc:
            raise IncidentDirRefused(f"cannot write incident bundle {directory / name}: {exc}") from exc
        _prune(dfd, keep)
    finally:
        os.close(dfd)
    return directory / name


def record_incident(directory: Path, bundle: IncidentBundle) -> str | None:
    """Write ``bundle`` and log it loudly; a refused directory is logged, not raised (the run's outcome
    is already recorded). Returns the path, or None when nothing was written."""
    try:
        path = write_incident(directory, bundle)
    except IncidentDirRefused as exc:
        log.error("incident bundle for %s not written: %s", bundle.pipeline, exc)
        return None
    log.error(
        "scheduled run of %s finished %s; incident bundle %s", bundle.pipeline, bundle.outcome, path
    )
    return str(path)


def _own_files(dfd: int) -> list[str]:
    names = []
    for name in os.listdir(dfd):
        if not _NAME.match(name):
            continue
        try:
            mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            names.append(name)
    return sorted(names)


def _prune(dfd: int, keep: int) -> None:
    names = _own_files(dfd)
    for name in names[: max(0, len(names) - keep)]:
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            continue
    os.fsync(dfd)


def list_incidents(directory: Path) -> list[Path]:
    """Incident bundles, newest first; an absent directory has none.

    Raises:
        IncidentDirRefused: the directory is a symlink or unreadable.
    """
    if not directory.exists() and not directory.is_symlink():
        return []
    dfd = _open_dir(directory, create=False)
    try:
        return [directory / n for n in reversed(_own_files(dfd))]
    finally:
        os.close(dfd)


def read_incident(path: Path) -> IncidentDocument:
    """One bundle, read through its wire model.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not an incident bundle.
    """
    return IncidentDocument.model_validate_json(path.read_bytes())
