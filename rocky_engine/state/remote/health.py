"""The doctor checks of remote state: ``state_rw`` and ``state_concurrency`` (CONTRACT section 8).

``rocky doctor`` runs both when ``[state] backend`` is not ``local``:

- ``state_rw`` writes, reads back and deletes a small probe object: Critical when the backend cannot
  be written or read (every run would fail or silently keep its state local). On ``tiered`` the cache
  is probed as well; a cache that does not answer is a Warning, since the durable tier still works.
- ``state_concurrency`` never does I/O. It is a Warning on every remote backend, because no backend
  makes two schedulers safe; the message says which row of the deployment contract's overlap table
  applies to this configuration.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rocky_engine.errors import ConfigError
from rocky_engine.state.remote.backend import ANY, RemoteLayout, RemoteStateError, call_with_deadline
from rocky_engine.state.remote.factory import open_backend

if TYPE_CHECKING:
    from rocky_engine.config.sections import StateConfig
    from rocky_engine.state.remote.backend import RemoteBackend

Status = Literal["healthy", "warning", "critical"]

#: the probe never waits longer than this, whatever transfer_timeout_seconds says
PROBE_TIMEOUT_SECONDS = 30.0
_ONE_SCHEDULER = "run one scheduler per project, one replica replaced in place on a persistent volume"


@dataclass(frozen=True)
class RemoteFinding:
    """What one check concluded (the fields of the doctor's ``Finding``)."""

    status: Status
    message: str
    suggestions: tuple[str, ...] = ()


def check_state_rw(state: StateConfig, namespace: str | None = None) -> RemoteFinding:
    """Put, get and delete a probe object on the configured backend."""
    if state.backend == "local":
        return RemoteFinding("healthy", "backend = local: the state file on the volume is the state")
    try:
        backend = open_backend(state, max_attempts=1)
    except ConfigError as exc:
        return RemoteFinding("critical", str(exc), ("fix [state] in rocky.toml",))
    except RemoteStateError as exc:
        return RemoteFinding("critical", str(exc))
    assert backend is not None
    timeout = min(float(state.transfer_timeout_seconds), PROBE_TIMEOUT_SECONDS)
    name = RemoteLayout(namespace).probe(uuid.uuid4().hex)
    try:
        t0 = time.perf_counter()
        try:
            problem = call_with_deadline(lambda: _probe(backend, name), timeout, "the state_rw probe")
        except RemoteStateError as exc:
            return RemoteFinding(
                "critical",
                f"cannot read and write the {state.backend} state backend: {exc}",
                ("check the credentials, the network path and that the bucket / server exists; until "
                 "then runs keep their state locally (on_upload_failure) or fail",),
            )
        if problem is not None:
            return RemoteFinding("critical", f"the {state.backend} state backend {problem}")
        ms = int((time.perf_counter() - t0) * 1000)
        message = f"put/get/delete probe on {backend.location} succeeded in {ms} ms"
        if state.backend == "tiered":
            cache_problem = _probe_cache(backend, name, timeout)
            if cache_problem is not None:
                return RemoteFinding(
                    "warning",
                    f"{message}, but the valkey cache {cache_problem}; runs read the durable tier directly",
                    ("check [state] valkey_url and that the server is up",),
                )
        return RemoteFinding("healthy", message)
    finally:
        backend.close()


def _probe(backend: RemoteBackend, name: str) -> str | None:
    payload = f"rocky doctor probe {name}".encode()
    backend.put(name, payload, expect=ANY, ttl_seconds=300)
    try:
        blob = backend.get(name)
    finally:
        backend.delete(name)
    if blob is None:
        return f"accepted a write to {backend.describe(name)} but could not read it back"
    if blob.data != payload:
        return f"returned different bytes for {backend.describe(name)} than were written"
    return None


def _probe_cache(backend: RemoteBackend, name: str, timeout: float) -> str | None:
    from rocky_engine.state.remote.tiered import TieredBackend

    assert isinstance(backend, TieredBackend)
    cache = backend.cache
    try:
        return call_with_deadline(lambda: _probe(cache, name + "-cache"), timeout, "the cache probe")
    except RemoteStateError as exc:
        return f"does not answer ({exc})"


def check_state_concurrency(state: StateConfig) -> RemoteFinding:
    """Which case of the deployment contract's overlap table this ``[state]`` is in (no I/O)."""
    backend, mode = state.backend, state.concurrency_control
    if backend == "local":
        return RemoteFinding(
            "healthy",
            "backend = local: no remote write at all; the file on the volume is the state and its writer "
            "lock serialises runs on that volume",
        )
    if backend == "gcs":
        return RemoteFinding("critical", "state backend 'gcs' is not supported yet; use local, s3, valkey or "
                             "tiered", ("fix [state] backend in rocky.toml",))
    if backend == "valkey":
        fallback = (
            "concurrency_control = \"cas\" is not available there and falls back to an unconditional "
            "upload (the run warns once)" if mode == "cas" else "concurrency_control = \"off\""
        )
        return RemoteFinding(
            "warning",
            f"backend = valkey, {fallback}: two runs on separate volumes both fire and the last writer "
            "wins silently, overwriting the other run's watermarks",
            (_ONE_SCHEDULER, "use backend = \"s3\" or \"tiered\" with concurrency_control = \"cas\" to make "
             "an overlap fail loudly"),
        )
    if mode == "off":
        return RemoteFinding(
            "warning",
            f"backend = {backend}, concurrency_control = \"off\": two runs on separate volumes both fire and "
            "the last writer wins silently, overwriting the other run's watermarks",
            (_ONE_SCHEDULER, "set [state] concurrency_control = \"cas\" to make an overlap fail loudly"),
        )
    return RemoteFinding(
        "warning",
        f"backend = {backend}, concurrency_control = \"cas\": two runs on separate volumes both fire; the "
        "one that uploads second fails closed (nonzero exit, an error naming the race) and the winner's "
        "state stands; cas does not stop the second run from happening",
        (_ONE_SCHEDULER,),
    )
