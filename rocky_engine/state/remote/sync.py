"""Remote state around one run: download before, upload after (deployment contract, "Remote state").

``open_synced_store(path, state, namespace=..., on_newer=...)`` replaces ``StateStore.open`` for
``rocky run``::

    synced = open_synced_store(path, state, namespace=ns)   # local lock, then the download
    with synced as store:
        synced.idempotency.claim(...)                         # the backend to claim keys on
        ...                                                   # run, record, finalize the key
        synced.upload()                                       # only on the path that recorded a run

1. open the local store as the writer (the lock is held for the whole run, upload included);
2. download the remote snapshot and load its syncable tables into the local store (the local-only
   tables are never touched); nothing remote yet means this run's state becomes the first upload;
   ``synced.idempotency`` claims keys on the backend (``claims.RemoteIdempotency``), or in the local store
   on the local backend;
3. the caller runs, recording into the store;
4. ``upload()``: a snapshot of the store with the local-only tables stripped. A run that skipped (its
   idempotency key was taken) or raised does not call it, so it never overwrites anyone's state.

Failure rules:

- a download that fails (unreachable, timed out, unreadable snapshot) leaves the local copy
  non-authoritative: the run goes on with it and its upload is suppressed; under
  ``on_upload_failure = "fail"`` the run then fails at the end, since its state reached no backend;
- an upload that fails is logged and dropped (``skip``) or fails the run (``fail``);
- ``concurrency_control = "cas"`` (s3, tiered): the upload is conditional on the generation this run
  downloaded; if another run uploaded in between, :class:`RemoteConflictError` names the race, whatever
  ``on_upload_failure`` says, and the winner's state stands. valkey warns once and uploads
  unconditionally; local has nothing remote to protect;
- a remote snapshot newer than this engine: ``on_schema_mismatch = "fail"`` refuses; ``"recreate"``
  warns once and runs on a fresh throwaway store that is never uploaded. A local store that was already
  downgraded (newer on disk) is never uploaded either.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

from rocky_engine.errors import StateError, StateSchemaError
from rocky_engine.logs import get_logger
from rocky_engine.state.remote.backend import (
    ANY,
    Condition,
    PreconditionFailed,
    RemoteBackend,
    RemoteConflictError,
    RemoteLayout,
    RemoteStateError,
    call_with_deadline,
)
from rocky_engine.state.remote.factory import open_backend
from rocky_engine.state.remote.retry import TransferRetrier
from rocky_engine.state.remote.snapshot_file import export_snapshot, import_snapshot, snapshot_version
from rocky_engine.state.store import OnNewer, StateStore

if TYPE_CHECKING:
    from rocky_engine.config.sections import StateConfig
    from rocky_engine.state.idempotency import IdempotencyBackend

log = get_logger("state.remote")

T = TypeVar("T")

DownloadOutcome = Literal["pending", "downloaded", "empty", "failed", "newer", "skipped"]

#: local metadata keys where the last known remote generation is kept (``rocky state``, doctor, people)
META_GENERATION = "remote_generation"
META_LOCATION = "remote_location"


@dataclass
class SyncStatus:
    """What the remote side of this run did."""

    backend: str
    location: str
    downloaded: DownloadOutcome = "pending"
    #: the generation the download saw; ``None`` when nothing was there yet
    generation: str | None = None
    uploaded: bool = False
    upload_generation: str | None = None
    #: why the upload will not happen (a failed download, a downgraded store); None when it will
    suppressed: str | None = None


class RemoteSync:
    """The download and upload of one run's state against one backend."""

    def __init__(self, state: StateConfig, backend: RemoteBackend, layout: RemoteLayout) -> None:
        self.state = state
        self.backend = backend
        self.layout = layout
        self.status = SyncStatus(backend=backend.kind, location=backend.location)
        self._download_failed = False
        self._remote_version: int | None = None
        self._retrier: TransferRetrier | None = (
            None if state.retry is None else TransferRetrier(state.retry)
        )

    @classmethod
    def for_state(cls, state: StateConfig, namespace: str | None) -> RemoteSync | None:
        """The sync of a project's ``[state]``; None for the local backend (``cas`` there is a no-op).

        Raises:
            ConfigError: ``gcs``, or a remote backend without its bucket / URL.
        """
        # [state.retry] retries whole transfers; the clients then try each request once, so the two
        # retry layers never multiply.
        backend = open_backend(state, max_attempts=None if state.retry is None else 1)
        if backend is None:
            return None
        return cls(state, backend, RemoteLayout(namespace))

    @property
    def timeout(self) -> float:
        return float(self.state.transfer_timeout_seconds)

    @property
    def cas(self) -> bool:
        """True when the upload is conditional on the downloaded generation."""
        return self.state.concurrency_control == "cas" and self.backend.supports_cas

    def close(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ start of the run

    def start(self, store: StateStore, on_newer: OnNewer, stack: ExitStack) -> StateStore:
        """Download into ``store``; returns the store the run must use (a throwaway one on recreate)."""
        if self.state.concurrency_control == "cas" and not self.backend.supports_cas:
            log.warning(
                f"concurrency_control = \"cas\" is not available on the {self.backend.kind} backend (it "
                "keeps no generation to compare against): this run uploads unconditionally and the last "
                "writer wins; use backend = \"s3\" or \"tiered\" for cas"
            )
        active = store
        if store.downgraded:
            # StateStore already warned that this store is newer than the engine and never uploaded.
            self.status.downloaded = "skipped"
            self._suppress("the local state store is newer than this engine (on_schema_mismatch = recreate)")
        else:
            outcome = self.download(store)
            if outcome == "newer":
                active = self._fresh_store(stack, on_newer)
        return active

    def download(self, store: StateStore) -> DownloadOutcome:
        """Load the remote snapshot's syncable tables into ``store`` (see the module rules)."""
        assert store.db_path is not None, "remote sync needs a writer store on a file"
        try:
            blob = call_with_deadline(
                self._retried(lambda: self.backend.get(self.layout.snapshot), "state download"),
                self.timeout, "state download",
            )
        except RemoteStateError as exc:
            return self._download_failed_with(exc)
        if blob is None:
            log.info(f"no remote state at {self._where()} yet; this run's state will be the first upload")
            self.status.downloaded = "empty"
            self.status.generation = None
            return "empty"
        work = Path(tempfile.mkdtemp(prefix="rocky-state-download-"))
        try:
            snapshot = work / "remote.sqlite"
            snapshot.write_bytes(blob.data)
            try:
                version = snapshot_version(snapshot, self._where())
            except RemoteStateError as exc:
                return self._download_failed_with(exc)
            from rocky_engine.state.schema import SCHEMA_VERSION

            if version > SCHEMA_VERSION:
                self.status.downloaded = "newer"
                self._remote_version = version
                return "newer"
            if version < SCHEMA_VERSION:
                try:
                    # Opening a copy as a writer migrates it forward, exactly like a local store.
                    StateStore.open(snapshot, writer=True).close()
                except StateError as exc:
                    return self._download_failed_with(
                        RemoteStateError(f"could not migrate the remote state from version {version}: {exc}")
                    )
            try:
                tables = import_snapshot(store.db_path, snapshot)
            except RemoteStateError as exc:
                return self._download_failed_with(exc)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.status.downloaded = "downloaded"
        self.status.generation = blob.generation
        self._record_generation(store, blob.generation)
        log.info(
            f"downloaded the remote state from {self._where()} ({len(tables)} tables, {len(blob.data)} bytes)"
        )
        return "downloaded"

    def _fresh_store(self, stack: ExitStack, on_newer: OnNewer) -> StateStore:
        from rocky_engine.state.schema import SCHEMA_VERSION

        version = self._remote_version
        if on_newer == "refuse":
            raise StateSchemaError(
                f"the remote state at {self._where()} has schema version {version}, newer than this engine "
                f"supports ({SCHEMA_VERSION}); upgrade rocky on every machine that shares this backend, or "
                "set [state] on_schema_mismatch = \"recreate\" to run once from a fresh local state"
            )
        log.warning(
            f"the remote state at {self._where()} has schema version {version}, newer than this engine "
            f"supports ({SCHEMA_VERSION}); on_schema_mismatch = recreate: running once from a fresh local "
            "state (a full refresh) that is discarded afterwards and never uploaded; the remote state and "
            "the local store on disk are left untouched"
        )
        self._suppress("the remote state is newer than this engine (on_schema_mismatch = recreate)")
        temp_dir = Path(tempfile.mkdtemp(prefix="rocky-state-downgraded-"))
        stack.callback(shutil.rmtree, temp_dir, ignore_errors=True)
        fresh = stack.enter_context(StateStore.open(temp_dir / "state.db", writer=True))
        fresh.downgraded = True
        return fresh

    def idempotency(self, store: StateStore) -> IdempotencyBackend:
        """Claims on this backend, mirrored into ``store`` (the store the run uses)."""
        from rocky_engine.state.remote.leases import RemoteIdempotency

        return RemoteIdempotency(
            store.idempotency, self.backend, self.layout,
            retention_days=float(self.state.idempotency.retention_days), timeout_seconds=self.timeout,
        )

    # ------------------------------------------------------------------ end of the run

    def upload(self, store: StateStore) -> None:
        """Upload ``store``'s syncable state (see the module rules for what a failure does)."""
        if self.status.suppressed is not None:
            self._report_suppressed()
            return
        assert store.db_path is not None and not store.downgraded
        work = Path(tempfile.mkdtemp(prefix="rocky-state-upload-"))
        try:
            data = export_snapshot(store.db_path, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        expect: Condition = self.status.generation if self.cas else ANY
        try:
            generation = call_with_deadline(
                self._retried(lambda: self.backend.put(self.layout.snapshot, data, expect=expect),
                              "state upload"),
                self.timeout, "state upload",
            )
        except PreconditionFailed as exc:
            raise self._race(exc) from None
        except RemoteStateError as exc:
            if self.state.on_upload_failure == "fail":
                raise RemoteStateError(
                    f"could not upload the state to {self._where()}: {exc}",
                    hint="the run's work is recorded in the local store only; on_upload_failure = \"fail\" "
                    "makes this an error (\"skip\" would log it and go on)",
                ) from None
            log.warning(
                f"could not upload the state to {self._where()} ({exc}); on_upload_failure = skip: the run "
                "stands, its state is in the local store only and the next download replaces it"
            )
            return
        self.status.uploaded = True
        self.status.upload_generation = generation
        self._record_generation(store, generation)
        log.info(f"uploaded the state to {self._where()} ({len(data)} bytes)")

    def _race(self, exc: PreconditionFailed) -> RemoteConflictError:
        seen = self.status.generation
        before = f"downloaded generation {seen}" if seen else "found no remote state"
        now = f" (the remote is now at {exc.current})" if exc.current else ""
        return RemoteConflictError(
            f"lost a state upload race on {self._where()}: another run uploaded its state after this run "
            f"{before}{now}; with concurrency_control = \"cas\" this run's state was not uploaded and the "
            "other run's state stands",
            hint="two runs of this project overlapped on separate volumes: keep one scheduler per project "
            "(docs/state.md); the next run downloads the winner's state and continues from its watermarks",
        )

    # ------------------------------------------------------------------ helpers

    def _retried(self, fn: Callable[[], T], what: str) -> Callable[[], T]:
        """``fn`` under ``[state.retry]`` (inside the transfer deadline: retries share its budget)."""
        retrier = self._retrier
        if retrier is None:
            return fn
        return lambda: retrier.call(fn, what)

    def _download_failed_with(self, exc: RemoteStateError) -> DownloadOutcome:
        self.status.downloaded = "failed"
        self._download_failed = True
        self._suppress(f"the download failed: {exc}")
        log.warning(
            f"could not download the remote state: {exc}; this run uses the local copy, which is not "
            "authoritative, and will not upload its state"
        )
        return "failed"

    def _suppress(self, reason: str) -> None:
        if self.status.suppressed is None:
            self.status.suppressed = reason

    def _report_suppressed(self) -> None:
        reason = self.status.suppressed
        if self._download_failed and self.state.on_upload_failure == "fail":
            raise RemoteStateError(
                f"the state was not uploaded to {self._where()} because {reason}",
                hint="the run's work is recorded in the local store only; fix access to the backend and "
                "rerun (on_upload_failure = \"skip\" would log this and go on)",
            )
        log.info(f"state not uploaded to {self._where()}: {reason}")

    def _record_generation(self, store: StateStore, generation: str) -> None:
        store.set_meta(META_GENERATION, generation)
        store.set_meta(META_LOCATION, self.backend.location)

    def _where(self) -> str:
        return self.backend.describe(self.layout.snapshot)


class SyncedStore:
    """The run's writer store plus its remote side; a context manager that closes both.

    ``with synced as store:`` yields the store the run must use; ``idempotency`` is where the run claims
    its key (the backend on a remote ``[state]``, else the store). Call :meth:`upload` once the run is
    recorded (and its idempotency key finalized); a run that skips or raises never uploads.
    """

    def __init__(self, store: StateStore, sync: RemoteSync | None, stack: ExitStack) -> None:
        self.store = store
        self.sync = sync
        self._stack = stack
        self.idempotency: IdempotencyBackend = store.idempotency if sync is None else sync.idempotency(store)

    @property
    def status(self) -> SyncStatus | None:
        """What the remote side did; None on the local backend."""
        return None if self.sync is None else self.sync.status

    def upload(self) -> bool:
        """Upload the state (no-op on local); True when it reached the backend (``status`` says more).

        Raises:
            RemoteConflictError: ``cas`` and another run uploaded first.
            RemoteStateError: the upload failed (or was suppressed) under ``on_upload_failure = "fail"``.
        """
        if self.sync is None:
            return False
        self.sync.upload(self.store)
        return self.sync.status.uploaded

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> StateStore:
        return self.store

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_synced_store(
    path: Path, state: StateConfig, *, namespace: str | None, on_newer: OnNewer = "refuse",
    wait_for_lock: float = 0, wait_purpose: str = "",
) -> SyncedStore:
    """Open the run's writer store at ``path`` and download the remote state of ``[state]`` into it (see
    the module rules); ``namespace`` (``--state-namespace``) names the project's remote subtree.

    With the local backend this is ``StateStore.open(path, writer=True)`` and ``upload`` does nothing.
    The local writer lock is taken first, so a second local writer fails exactly as before, with
    ``StateLockedError``, before any remote I/O; ``wait_for_lock`` (seconds) waits for it first.

    Raises:
        ConfigError: ``gcs`` or an incomplete ``[state]``.
        StateLockedError: another process holds the local writer lock.
        StateSchemaError: the local or the remote state is newer and ``on_newer = "refuse"``.
    """
    sync = RemoteSync.for_state(state, namespace)
    with ExitStack() as stack:
        if sync is not None:
            stack.callback(sync.close)
        local = stack.enter_context(
            StateStore.open(path, writer=True, on_newer=on_newer, wait_seconds=wait_for_lock,
                            wait_purpose=wait_purpose))
        active = local if sync is None else sync.start(local, on_newer, stack)
        return SyncedStore(active, sync, stack.pop_all())
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns or raises
