"""The state store's writer lock as a connector run takes it: with a bounded wait, and with a way to free a
claim that the lock does not let the run free at once.

A connector run takes the writer lock three times: for the claim, from just before the promote through
the state commit (one hold, so no other writer can come between the two writes), and to free its claim
after a failure before the promote. Each wait is bounded by ``state_lock_wait_secs`` of the connector
(default :data:`DEFAULT_LOCK_WAIT_SECS`). A ``rocky run`` holds the lock for its whole run, so a load
that overlaps it meets the lock, fails before the promote, and cannot take the lock again to free its
claim either. It then notes the claim in ``<state file>.connector-frees``; the next connector run that
takes the lock frees the noted claims before it claims its own batch, so the batch runs again at once
instead of being skipped until the claim expires. A noted free closes only a claim still held by the
run that noted it (``finalize`` matches the run id), so a stale note is harmless.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.logs import get_logger

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.remote.sync import SyncedStore

log = get_logger("connector")

#: The default of ``[connector.NAME] state_lock_wait_secs``.
DEFAULT_LOCK_WAIT_SECS = 30
_POLL_SECS = 0.1


def open_state_waiting(project: Project, wait_secs: float, purpose: str) -> SyncedStore:
    """Open the state store as its writer (and download the remote state, on a remote backend), waiting up
    to ``wait_secs`` for another rocky's writer lock.

    Raises:
        StateLockedError: still locked after ``wait_secs``; its message names the other writer.
    """
    from rocky_engine.state.remote import open_synced_store

    # The store waits (one log line naming the holder), as for `rocky run --wait-for-lock`.
    return open_synced_store(
        project.state_path(), project.config.state, namespace=project.state_namespace, on_newer="refuse",
        wait_for_lock=wait_secs, wait_purpose=purpose,
    )


def frees_path(project: Project) -> Path:
    path = project.state_path()
    return path.with_name(path.name + ".connector-frees")


def note_free(project: Project, key: str, run_id: str) -> bool:
    """Note that ``run_id``'s claim on ``key`` is to be freed (one appended JSON line); False on failure."""
    line = json.dumps({"key": key, "run_id": run_id}).encode("utf-8") + b"\n"
    try:
        fd = os.open(frees_path(project), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not note the claim %s to be freed: %s", key, exc)
        return False
    return True


def apply_noted_frees(project: Project, synced: SyncedStore, clock: Callable[[], datetime]) -> int:
    """Free every noted claim (the caller holds the writer lock); returns how many were freed. ``clock``
    is read only when there is a note (a run's clock calls are its own business)."""
    path = frees_path(project)
    taken = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        os.rename(path, taken)  # a note appended from now on goes to a new file, for the next run
    except FileNotFoundError:
        return 0
    except OSError as exc:
        log.warning("could not read the noted claim frees %s: %s", path, exc)
        return 0
    freed = 0
    now = clock()
    try:
        for raw in taken.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                note = json.loads(raw)
                key, run_id = str(note["key"]), str(note["run_id"])
            except (ValueError, KeyError, TypeError):
                continue
            if synced.idempotency.finalize(key, run_id, False, now):
                log.info("freed the claim %s that run %s could not free (the state store was busy)", key,
                         run_id)
                freed += 1
    finally:
        taken.unlink(missing_ok=True)
    return freed
