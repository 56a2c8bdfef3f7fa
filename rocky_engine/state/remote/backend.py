"""The seam every remote state backend implements, and the pieces they share.

A backend stores named blobs (the state snapshot, claims, a doctor probe) and answers writes that are
conditional on a *generation*: S3's ETag, or on valkey the SHA-1 of the value (only claims use that;
state uploads on valkey are never conditional, see ``supports_cas``). Three write conditions:

- ``ANY``: write unconditionally (last writer wins);
- ``None``: create only if the name does not exist (S3 ``If-None-Match: *``, valkey ``SET NX``);
- a generation string: replace only if the current value still has it (S3 ``If-Match``).

A condition that does not hold raises :class:`PreconditionFailed`; any other failure raises
:class:`RemoteStateError` with a message that names the location (never a credential).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from rocky_engine.errors import StateError

T = TypeVar("T")

#: attempts per request, first try included (each client's own retry mode backs off between them)
DEFAULT_ATTEMPTS = 3


class _Unconditional:
    """The type of :data:`ANY`."""

    def __repr__(self) -> str:
        return "ANY"


#: Write condition: overwrite whatever is there.
ANY: Final = _Unconditional()

#: ``ANY``, ``None`` (must not exist) or the generation the current value must have.
Condition = str | None | _Unconditional


class RemoteStateError(StateError):
    """A remote state backend could not be reached, read or written."""


def missing_client(backend: str, package: str) -> RemoteStateError:
    """The error for a backend whose client library (shipped with the ``remote`` extra) is not installed."""
    return RemoteStateError(
        f"the {backend} state backend needs {package}, which is not installed",
        hint="install rocky with the remote extra: pip install 'rocky[remote]'",
    )


class RemoteConflictError(RemoteStateError):
    """``concurrency_control = "cas"``: another run uploaded the state after this run downloaded it."""


class PreconditionFailed(Exception):
    """A conditional write found a different generation (or an existing object for a create)."""

    def __init__(self, name: str, current: str | None = None) -> None:
        self.name = name
        self.current = current
        super().__init__(f"precondition failed for {name}")


@dataclass(frozen=True)
class Blob:
    """One stored value and the generation a conditional write must name to replace it."""

    data: bytes
    generation: str


class RemoteBackend(Protocol):
    """A place that keeps named blobs for remote state."""

    #: ``s3``, ``valkey`` or ``tiered``
    kind: str
    #: True when the state upload can be conditional on the downloaded generation (``cas``).
    supports_cas: bool
    #: Where the blobs live, for messages (``s3://bucket/prefix/``, ``redis://host:6379/0 prefix``).
    location: str

    def describe(self, name: str) -> str:
        """Where ``name`` lives, for messages (no credentials)."""
        ...

    def get(self, name: str) -> Blob | None:
        """The blob and its generation, ``None`` when ``name`` does not exist."""
        ...

    def put(
        self, name: str, data: bytes, *, expect: Condition = ANY, ttl_seconds: float | None = None
    ) -> str:
        """Write ``data`` under ``name`` if ``expect`` holds; returns the new generation.

        ``ttl_seconds`` lets a backend that can expire keys (valkey) forget the blob; S3 ignores it.
        """
        ...

    def delete(self, name: str, *, expect: str | _Unconditional = ANY) -> None:
        """Delete ``name`` (a missing name is not an error); with a generation, only if it still has it."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RemoteLayout:
    """The names a project's remote state uses inside a backend.

    The default project keeps ``state.sqlite`` at the top of the prefix; ``--state-namespace KEY`` keeps
    its own ``ns/KEY/`` subtree, so namespaces never share a snapshot or a claim.
    """

    namespace: str | None = None

    @property
    def root(self) -> str:
        return "" if self.namespace is None else f"ns/{self.namespace}/"

    @property
    def snapshot(self) -> str:
        return f"{self.root}state.sqlite"

    def idempotency(self, key: str) -> str:
        return f"{self.root}idempotency/{quote(key, safe='')}"

    def lock(self, key: str) -> str:
        return f"{self.root}locks/{quote(key, safe='')}"

    def probe(self, token: str) -> str:
        return f"{self.root}doctor-probe/{token}"


def call_with_deadline(fn: Callable[[], T], seconds: float, what: str) -> T:
    """Run ``fn`` and give up after ``seconds`` (``transfer_timeout_seconds``).

    The socket timeouts of the clients bound each request; this bounds the whole transfer, retries and
    backoff included. A transfer that runs out of time is abandoned on a daemon thread: its socket
    timeouts end it, and it can never make the process hang on exit.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, name=f"rocky-remote-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise RemoteStateError(
            f"{what} did not finish within transfer_timeout_seconds = {seconds:g}",
            hint="check the network path to the state backend, or raise [state] transfer_timeout_seconds",
        )
    if error:
        raise error[0]
    return result[0]


def redact_url(url: str) -> str:
    """``url`` without its user and password, so a message can name the endpoint."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
