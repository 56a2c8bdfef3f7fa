"""The valkey backend (redis-py): a Valkey or Redis server keeps the state snapshot and the claims.

Keys are ``<valkey_prefix><name>``. A state upload on valkey is never conditional (``supports_cas`` is
False; the deployment contract documents that ``cas`` falls back to last-writer-wins there). Claims are
still atomic: a create is ``SET NX``, and a replace or delete that must see a known value runs as one Lua
script comparing the SHA-1 of the current value, which is this backend's generation.

Retries with backoff on connection errors and timeouts are redis-py's ``Retry(ExponentialBackoff)``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rocky_engine.state.remote.backend import (
    ANY,
    DEFAULT_ATTEMPTS,
    Blob,
    Condition,
    PreconditionFailed,
    RemoteStateError,
    _Unconditional,
    missing_client,
    redact_url,
)

# Replace KEYS[1] with ARGV[2] only if SHA-1(current) == ARGV[1]; ARGV[3] is a TTL in ms or ''.
_REPLACE_IF = """
local cur = redis.call('GET', KEYS[1])
if (not cur) or redis.sha1hex(cur) ~= ARGV[1] then return 0 end
if ARGV[3] == '' then redis.call('SET', KEYS[1], ARGV[2])
else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"""

# Delete KEYS[1] only if SHA-1(current) == ARGV[1]; a missing key counts as deleted.
_DELETE_IF = """
local cur = redis.call('GET', KEYS[1])
if not cur then return 1 end
if redis.sha1hex(cur) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""


def generation_of(data: bytes) -> str:
    """The generation of a valkey value: the SHA-1 Lua's ``redis.sha1hex`` computes server-side."""
    return hashlib.sha1(data).hexdigest()


class ValkeyBackend:
    """Blobs under ``<valkey_prefix>`` on one Valkey / Redis server."""

    kind = "valkey"
    supports_cas = False

    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        timeout_seconds: float = 300,
        max_attempts: int = DEFAULT_ATTEMPTS,
    ) -> None:
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError as exc:  # pragma: no cover - redis ships with the [remote] extra
            raise missing_client("valkey", "the redis package") from exc
        self.prefix = prefix
        self._url = redact_url(url)
        self.location = f"{self._url} (prefix {prefix!r})"
        client_url = _redis_scheme(url)
        try:
            self._client: Any = redis.Redis.from_url(
                client_url,
                socket_timeout=timeout_seconds,
                socket_connect_timeout=min(timeout_seconds, 10),
                retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), max(max_attempts - 1, 0)),
                retry_on_error=[redis.ConnectionError, redis.TimeoutError],
            )
        except ValueError as exc:
            raise RemoteStateError(
                f"[state] valkey_url {redact_url(url)} is not a valid URL: {exc}",
                hint="write it as redis://[:password@]host:port/db (or valkey://..., rediss:// for TLS)",
            ) from None
        self._replace_if = self._client.register_script(_REPLACE_IF)
        self._delete_if = self._client.register_script(_DELETE_IF)

    def _key(self, name: str) -> str:
        return self.prefix + name

    def describe(self, name: str) -> str:
        return f"key {self._key(name)!r} on {self._url}"

    def get(self, name: str) -> Blob | None:
        data = self._call("read", name, lambda: self._client.get(self._key(name)))
        if data is None:
            return None
        return Blob(data=bytes(data), generation=generation_of(bytes(data)))

    def put(
        self, name: str, data: bytes, *, expect: Condition = ANY, ttl_seconds: float | None = None
    ) -> str:
        px = None if ttl_seconds is None else max(int(ttl_seconds * 1000), 1)
        key = self._key(name)
        if isinstance(expect, _Unconditional):
            self._call("write", name, lambda: self._client.set(key, data, px=px))
        elif expect is None:
            created = self._call("write", name, lambda: self._client.set(key, data, px=px, nx=True))
            if not created:
                raise PreconditionFailed(name)
        else:
            args = [expect, data, "" if px is None else px]
            ok = self._call("write", name, lambda: self._replace_if(keys=[key], args=args))
            if not ok:
                raise PreconditionFailed(name)
        return generation_of(data)

    def delete(self, name: str, *, expect: str | _Unconditional = ANY) -> None:
        key = self._key(name)
        if isinstance(expect, _Unconditional):
            self._call("delete", name, lambda: self._client.delete(key))
            return
        if not self._call("delete", name, lambda: self._delete_if(keys=[key], args=[expect])):
            raise PreconditionFailed(name)

    def close(self) -> None:
        self._client.close()

    def _call(self, action: str, name: str, fn: Any) -> Any:
        import redis

        try:
            return fn()
        except redis.AuthenticationError as exc:
            raise RemoteStateError(
                f"could not {action} {self.describe(name)}: authentication failed ({exc})",
                hint="check the password / user in [state] valkey_url",
            ) from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RemoteStateError(
                f"could not {action} {self.describe(name)}: {exc}",
                hint="check that the server is up and reachable from this machine",
            ) from None
        except redis.RedisError as exc:
            raise RemoteStateError(
                f"could not {action} {self.describe(name)}: {exc}"
            ) from None


def _redis_scheme(url: str) -> str:
    """redis-py speaks ``redis://`` / ``rediss://``; accept Valkey's own scheme names as well."""
    for ours, theirs in (("valkeys://", "rediss://"), ("valkey://", "redis://")):
        if url.startswith(ours):
            return theirs + url[len(ours):]
    return url
