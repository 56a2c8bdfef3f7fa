"""Remote state: a copy of the syncable tables on s3, valkey or tiered (deployment contract).

- :func:`open_synced_store`: the run's writer store, downloaded before and uploaded after.
- :class:`RemoteClaims`: atomic cross-machine leases (``remote_claim`` / ``remote_get`` /
  ``remote_release``) for exactly-once work such as connector claims.
- :mod:`.health`: the doctor checks ``state_rw`` and ``state_concurrency``.

boto3 and redis are imported only when a project uses a backend that needs them.
"""

from __future__ import annotations

from rocky_engine.state.remote.backend import (
    ANY,
    Blob,
    PreconditionFailed,
    RemoteBackend,
    RemoteConflictError,
    RemoteLayout,
    RemoteStateError,
)
from rocky_engine.state.remote.factory import REMOTE_BACKENDS, open_backend
from rocky_engine.state.remote.leases import RemoteClaims, RemoteIdempotency
from rocky_engine.state.remote.sync import RemoteSync, SyncedStore, SyncStatus, open_synced_store

__all__ = [
    "ANY",
    "REMOTE_BACKENDS",
    "Blob",
    "PreconditionFailed",
    "RemoteBackend",
    "RemoteClaims",
    "RemoteConflictError",
    "RemoteIdempotency",
    "RemoteLayout",
    "RemoteStateError",
    "RemoteSync",
    "SyncStatus",
    "SyncedStore",
    "open_backend",
    "open_synced_store",
]
