"""``[state.retry]`` (upstream Rocky's form): a state transfer that fails transiently is retried.

The failures are real: a TCP proxy of the test's own, in front of a real redis-server, drops the first
connections it accepts (the client sees the server hang up), then forwards bytes both ways.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocky_engine.config.sections import StateConfig
from rocky_engine.state.remote import RemoteSync
from rocky_engine.state.store import StateStore
from tests.fixtures.redis import RedisServer

pytestmark = pytest.mark.services


class FlakyProxy:
    """Hangs up on the first ``drop`` connections, then forwards to ``127.0.0.1:<target>``."""

    def __init__(self, target: int, drop: int) -> None:
        self.target = target
        self.drop = drop
        self.dropped = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self.dropped < self.drop:
                self.dropped += 1
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def proxy_factory(redis_server: RedisServer) -> Iterator[type[FlakyProxy]]:
    made: list[FlakyProxy] = []

    class _Made(FlakyProxy):
        def __init__(self, target: int, drop: int) -> None:
            super().__init__(target, drop)
            made.append(self)

    yield _Made
    for proxy in made:
        proxy.close()


def _config(port: int, prefix: str, **retry: object) -> StateConfig:
    return StateConfig.model_validate({
        "backend": "valkey", "valkey_url": f"redis://127.0.0.1:{port}/0", "valkey_prefix": prefix,
        "transfer_timeout_seconds": 30,
        "retry": {"initial_backoff_ms": 1, "jitter": False, **retry},
    })


def test_transient_failures_are_retried(
    tmp_path: Path, redis_server: RedisServer, redis_prefix: str, proxy_factory: type[FlakyProxy]
) -> None:
    proxy = proxy_factory(redis_server.port, drop=2)
    sync = RemoteSync.for_state(_config(proxy.port, redis_prefix, max_retries=3), None)
    assert sync is not None
    with StateStore.open(tmp_path / "state.db") as store:
        assert sync.download(store) == "empty"  # reached the server on the third attempt
        assert proxy.dropped == 2
        sync.upload(store)
    sync.close()
    assert sync.status.uploaded
    assert redis_server.client().get(f"{redis_prefix}state.sqlite") is not None


def test_more_failures_than_retries_fail_the_download(
    tmp_path: Path, redis_server: RedisServer, redis_prefix: str, proxy_factory: type[FlakyProxy]
) -> None:
    proxy = proxy_factory(redis_server.port, drop=3)
    sync = RemoteSync.for_state(_config(proxy.port, redis_prefix, max_retries=1), None)
    assert sync is not None
    with StateStore.open(tmp_path / "state.db") as store:
        assert sync.download(store) == "failed"
    sync.close()
    # one attempt per request at the client (no hidden client retries), plus one retry of ours
    assert proxy.dropped == 2
    assert sync.status.suppressed is not None and "download failed" in sync.status.suppressed


def test_run_budget_stops_retrying(
    tmp_path: Path, redis_server: RedisServer, redis_prefix: str, proxy_factory: type[FlakyProxy]
) -> None:
    proxy = proxy_factory(redis_server.port, drop=10)
    sync = RemoteSync.for_state(
        _config(proxy.port, redis_prefix, max_retries=5, max_retries_per_run=1), None
    )
    assert sync is not None
    with StateStore.open(tmp_path / "state.db") as store:
        assert sync.download(store) == "failed"
    sync.close()
    assert proxy.dropped == 2  # the run's budget allowed one retry, whatever max_retries says


def test_unknown_retry_key_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown key 'max_retry'"):
        StateConfig.model_validate({"retry": {"max_retry": 3}})
