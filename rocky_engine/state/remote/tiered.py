"""The tiered backend: S3 is the durable tier and the authority, valkey a read cache kept coherent with it.

Every cache entry carries the S3 generation (ETag) it was copied from. A read asks S3 for the current
generation (a HEAD, no body) and serves the cached body only when the generations match; otherwise it
reads S3 and refreshes the cache. A write goes to S3 first (conditionally, so ``cas`` holds exactly as
on the s3 backend) and then refreshes the cache with the new generation. A stale or missing cache entry
therefore costs one S3 read and is never served; a cache that is down only costs the saving (one warning
per process), never correctness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rocky_engine.logs import get_logger
from rocky_engine.state.remote.backend import ANY, Blob, Condition, RemoteStateError, _Unconditional
from rocky_engine.state.remote.s3 import S3Backend
from rocky_engine.state.remote.valkey import ValkeyBackend

T = TypeVar("T")

log = get_logger("state.remote")

_SEP = b"\n"


class TieredBackend:
    """S3 (durable) behind a valkey read cache."""

    kind = "tiered"
    supports_cas = True

    def __init__(self, durable: S3Backend, cache: ValkeyBackend) -> None:
        self.durable = durable
        self.cache = cache
        self.location = f"{durable.location}, cached in {cache.location}"
        self._cache_warned = False
        #: cache hits and misses of this process (tests and the doctor read them)
        self.hits = 0
        self.misses = 0

    def describe(self, name: str) -> str:
        return f"{self.durable.describe(name)} (cached in {self.cache.location})"

    def get(self, name: str) -> Blob | None:
        current = self.durable.head(name)
        if current is None:
            self._cache_call(lambda: self.cache.delete(name))
            return None
        cached = self._cache_call(lambda: self.cache.get(name))
        if cached is not None:
            entry = _unpack(cached.data)
            if entry is not None and entry.generation == current:
                self.hits += 1
                return entry
        self.misses += 1
        blob = self.durable.get(name)
        if blob is not None:
            self._cache_call(lambda: self.cache.put(name, _pack(blob)))
        return blob

    def put(
        self, name: str, data: bytes, *, expect: Condition = ANY, ttl_seconds: float | None = None
    ) -> str:
        generation = self.durable.put(name, data, expect=expect, ttl_seconds=ttl_seconds)
        blob = Blob(data=data, generation=generation)
        self._cache_call(lambda: self.cache.put(name, _pack(blob), ttl_seconds=ttl_seconds))
        return generation

    def delete(self, name: str, *, expect: str | _Unconditional = ANY) -> None:
        self.durable.delete(name, expect=expect)
        self._cache_call(lambda: self.cache.delete(name))

    def close(self) -> None:
        try:
            self.cache.close()
        finally:
            self.durable.close()

    def _cache_call(self, fn: Callable[[], T]) -> T | None:
        """Run a cache operation; a cache failure degrades to the durable tier alone."""
        try:
            return fn()
        except RemoteStateError as exc:
            if not self._cache_warned:
                self._cache_warned = True
                log.warning(f"state cache unavailable, reading and writing the durable tier only: {exc}")
            return None


def _pack(blob: Blob) -> bytes:
    return blob.generation.encode() + _SEP + blob.data


def _unpack(raw: bytes) -> Blob | None:
    generation, sep, data = raw.partition(_SEP)
    if not sep or not generation:
        return None
    return Blob(data=data, generation=generation.decode(errors="replace"))
