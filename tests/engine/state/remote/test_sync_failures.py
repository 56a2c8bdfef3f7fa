"""Transfer failures: on_upload_failure skip vs fail, a failed download suppressing the upload, retries and
the transfer deadline."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocky_engine.config.sections import StateConfig
from rocky_engine.errors import RockyError
from rocky_engine.state.remote import RemoteLayout, RemoteStateError, RemoteSync, open_backend
from rocky_engine.state.store import StateStore
from tests.engine.state.remote.conftest import Machine, Remote
from tests.fixtures.redis import RedisServer

pytestmark = pytest.mark.services


KILL_SERVER = """\
import os, signal, socket, sys, time
os.kill(int(sys.argv[1]), signal.SIGTERM)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:  # until the port refuses connections
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=1).close()
    except OSError:
        break
    time.sleep(0.05)
"""


def _valkey_machine(
    machines: Callable[[str], Machine], server: RedisServer, policy: str, *, kill_during_run: bool
) -> Machine:
    remote = Remote("valkey", redis=server, redis_prefix="p:")
    hooks = ""
    m = machines("m")
    if kill_during_run:
        # The server dies after the download and before the upload, as a network partition would.
        assert server.proc is not None
        script = m.root / "kill_server.py"
        script.write_text(KILL_SERVER)
        command = f"{sys.executable} {script} {server.proc.pid} {server.port}"
        hooks = f"[[hook.on_pipeline_start]]\ncommand = '{command}'\n"
    m.write(remote.state_toml(on_upload_failure=policy, transfer_timeout_seconds=5), hooks)
    m.seed("2024-01-01 00:00:00")
    return m


@pytest.mark.slow
def test_upload_failure_skip_keeps_the_run(
    machines: Callable[[str], Machine], redis_factory: Callable[[], RedisServer]
) -> None:
    m = _valkey_machine(machines, redis_factory(), "skip", kill_during_run=True)
    result = m.rocky("run", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "Success"
    assert "could not upload the state to key 'p:state.sqlite' on redis://127.0.0.1:" in result.stderr
    assert "on_upload_failure = skip: the run stands" in result.stderr
    assert m.watermark() == "2024-01-01T00:00:00Z"  # kept locally


@pytest.mark.slow
def test_upload_failure_fail_fails_the_run(
    machines: Callable[[str], Machine], redis_factory: Callable[[], RedisServer]
) -> None:
    m = _valkey_machine(machines, redis_factory(), "fail", kill_during_run=True)
    result = m.rocky("run", "-o", "table")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert errors[0].startswith("error: could not upload the state to key 'p:state.sqlite' on redis://127.0.0.1:")
    assert 'on_upload_failure = "fail" makes this an error' in errors[0]
    # the run's document still comes first, and it and the local run record say the same (issue 13)
    assert "status=Failure" in result.stdout
    assert m.local_rows("SELECT status, exit_code FROM run_history") == [("Failure", 1)]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["skip", "fail"])
def test_failed_download_suppresses_the_upload(
    policy: str, s3_remote: Remote, machines: Callable[[str], Machine]
) -> None:
    garbage = b"this is not a sqlite file, and must not be replaced by a non-authoritative upload"
    s3_remote.put_snapshot(garbage)
    m = machines("m")
    m.write(s3_remote.state_toml(on_upload_failure=policy))
    m.seed("2024-01-01 00:00:00")
    result = m.rocky("run", "-o", "json")
    assert "could not download the remote state: the remote state at s3://" in result.stderr
    assert "is not a readable rocky state snapshot" in result.stderr
    assert "this run uses the local copy, which is not authoritative, and will not upload its state" in (
        result.stderr
    )
    assert s3_remote.snapshot() == garbage, "a failed download must suppress the upload"
    assert m.watermark() == "2024-01-01T00:00:00Z"  # the run itself went ahead on the local copy
    if policy == "skip":
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 1
        assert '"level": "error"' in result.stderr
        assert "the state was not uploaded to s3://" in result.stderr
        assert json.loads(result.stdout)["status"] == "Failure"  # the document first, as every exit 1
        assert "because the download failed" in result.stderr


def _sync(config: StateConfig) -> RemoteSync:
    backend = open_backend(config)
    assert backend is not None
    return RemoteSync(config, backend, RemoteLayout())


def test_unreachable_backend_suppresses_the_upload(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = StateConfig(backend="s3", s3_bucket="b-x", s3_endpoint_url=f"http://127.0.0.1:{port}",
                         transfer_timeout_seconds=30)
    sync = _sync(config)
    with StateStore.open(tmp_path / "state.db") as store:
        assert sync.download(store) == "failed"
        assert sync.status.suppressed is not None and "the download failed" in sync.status.suppressed
        assert "Could not connect to the endpoint URL" in sync.status.suppressed
        sync.upload(store)  # skip: logs, does not raise, does not try
    assert not sync.status.uploaded
    sync.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def test_transfer_timeout_bounds_the_whole_transfer(tmp_path: Path, silent_server: int) -> None:
    config = StateConfig(backend="valkey", valkey_url=f"redis://127.0.0.1:{silent_server}/0",
                         transfer_timeout_seconds=1)
    sync = _sync(config)
    t0 = time.monotonic()
    with StateStore.open(tmp_path / "state.db") as store:
        assert sync.download(store) == "failed"
    assert time.monotonic() - t0 < 3
    reason = sync.status.suppressed or ""
    assert "state download did not finish within transfer_timeout_seconds = 1" in reason
    sync.close()


def test_upload_timeout_under_fail_raises(tmp_path: Path, silent_server: int) -> None:
    config = StateConfig(backend="valkey", valkey_url=f"redis://127.0.0.1:{silent_server}/0",
                         transfer_timeout_seconds=1, on_upload_failure="fail")
    sync = _sync(config)
    sync.status.downloaded = "empty"  # as if the download had found nothing
    with StateStore.open(tmp_path / "state.db") as store, pytest.raises(RemoteStateError) as info:
        sync.upload(store)
    assert "state upload did not finish within transfer_timeout_seconds = 1" in str(info.value)
    assert isinstance(info.value, RockyError)
    sync.close()
