"""Build the remote backend that ``[state]`` names (``None`` for ``local``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.config.sections import StateConfig
    from rocky_engine.state.remote.backend import RemoteBackend
    from rocky_engine.state.remote.s3 import S3Backend
    from rocky_engine.state.remote.valkey import ValkeyBackend

#: the backends that keep a copy of the state somewhere else
REMOTE_BACKENDS: tuple[str, ...] = ("s3", "valkey", "tiered")


def open_backend(state: StateConfig, *, max_attempts: int | None = None) -> RemoteBackend | None:
    """The backend of ``state``, or ``None`` when the state is the local file alone.

    Args:
        state: the ``[state]`` section.
        max_attempts: attempts per request (first try included); the clients' default when None.

    Raises:
        ConfigError: ``gcs`` (not supported yet), or a remote backend without its location.
    """
    backend = state.backend
    if backend == "local":
        return None
    if backend == "gcs":
        raise ConfigError(
            "state backend 'gcs' is not supported yet; use local, s3, valkey or tiered",
            key="state.backend",
        )
    if backend in ("s3", "tiered") and not state.s3_bucket:
        raise ConfigError(f"state backend '{backend}' needs s3_bucket", key="state.s3_bucket")
    if backend in ("valkey", "tiered") and not state.valkey_url:
        raise ConfigError(f"state backend '{backend}' needs valkey_url", key="state.valkey_url")
    timeout = float(state.transfer_timeout_seconds)
    attempts: dict[str, int] = {} if max_attempts is None else {"max_attempts": max_attempts}
    if backend == "s3":
        return _s3(state, timeout, attempts)
    if backend == "valkey":
        return _valkey(state, timeout, attempts)
    from rocky_engine.state.remote.tiered import TieredBackend

    return TieredBackend(_s3(state, timeout, attempts), _valkey(state, timeout, attempts))


def _s3(state: StateConfig, timeout: float, attempts: dict[str, int]) -> S3Backend:
    from rocky_engine.state.remote.s3 import S3Backend

    assert state.s3_bucket is not None
    return S3Backend(
        state.s3_bucket, state.s3_prefix, endpoint_url=state.s3_endpoint_url, timeout_seconds=timeout,
        **attempts,
    )


def _valkey(state: StateConfig, timeout: float, attempts: dict[str, int]) -> ValkeyBackend:
    from rocky_engine.state.remote.valkey import ValkeyBackend

    assert state.valkey_url is not None
    return ValkeyBackend(state.valkey_url, state.valkey_prefix, timeout_seconds=timeout, **attempts)
