"""The backends against the real servers: conditional writes, generations, deletes, the tiered cache."""

from __future__ import annotations

import concurrent.futures as cf

import pytest

from rocky_engine.errors import ConfigError
from rocky_engine.state.remote import ANY, PreconditionFailed, RemoteStateError, open_backend
from rocky_engine.state.remote.tiered import TieredBackend
from tests.engine.state.remote.conftest import Remote

pytestmark = pytest.mark.services


@pytest.fixture(params=["s3", "valkey", "tiered"])
def remote(request: pytest.FixtureRequest) -> Remote:
    fixture: Remote = request.getfixturevalue(f"{request.param}_remote")
    return fixture


def test_put_get_delete_and_conditions(remote: Remote) -> None:
    backend = open_backend(remote.config())
    assert backend is not None
    try:
        assert backend.get("k") is None
        gen1 = backend.put("k", b"one", expect=None)
        with pytest.raises(PreconditionFailed):
            backend.put("k", b"two", expect=None)  # create-only on an existing name
        blob = backend.get("k")
        assert blob is not None and blob.data == b"one" and blob.generation == gen1
        with pytest.raises(PreconditionFailed):
            backend.put("k", b"two", expect="stale-generation")
        gen2 = backend.put("k", b"two", expect=gen1)
        assert gen2 != gen1
        with pytest.raises(PreconditionFailed):
            backend.put("k", b"three", expect=gen1)  # gen1 is gone
        backend.put("k", b"four", expect=ANY)
        assert backend.get("k") is not None
        backend.delete("k")
        assert backend.get("k") is None
        backend.delete("k")  # deleting a missing name is not an error
    finally:
        backend.close()


def test_exactly_one_concurrent_create_wins(remote: Remote) -> None:
    backend = open_backend(remote.config())
    assert backend is not None

    def create(i: int) -> bool:
        try:
            backend.put("race", f"writer {i}".encode(), expect=None)
            return True
        except PreconditionFailed:
            return False

    try:
        with cf.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(create, range(8)))
        assert results.count(True) == 1
    finally:
        backend.close()


def test_s3_and_tiered_support_cas_valkey_does_not(remote: Remote) -> None:
    backend = open_backend(remote.config())
    assert backend is not None
    assert backend.supports_cas is (remote.backend != "valkey")
    backend.close()


def test_tiered_cache_is_validated_against_the_durable_generation(tiered_remote: Remote) -> None:
    backend = open_backend(tiered_remote.config())
    assert isinstance(backend, TieredBackend)
    try:
        backend.put("state.sqlite", b"v1")
        first = backend.get("state.sqlite")
        assert first is not None and first.data == b"v1"
        assert backend.hits == 1  # the write filled the cache with its generation
        # Another machine writes the durable tier directly; the cache still holds v1.
        tiered_remote.put_snapshot(b"v2")
        second = backend.get("state.sqlite")
        assert second is not None and second.data == b"v2", "a stale cache entry must never be served"
        assert backend.misses == 1
        third = backend.get("state.sqlite")
        assert third is not None and third.data == b"v2" and backend.hits == 2  # refreshed
    finally:
        backend.close()


def test_tiered_keeps_working_when_the_cache_is_down(
    s3_remote: Remote, redis_factory: object, caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_factory()  # type: ignore[operator]
    remote = Remote("tiered", s3=s3_remote.s3, s3_prefix=s3_remote.s3_prefix, redis=server, redis_prefix="p:")
    backend = open_backend(remote.config(transfer_timeout_seconds=5), max_attempts=1)
    assert backend is not None
    server.stop()
    try:
        gen = backend.put("state.sqlite", b"durable")
        blob = backend.get("state.sqlite")
        assert blob is not None and blob.data == b"durable" and blob.generation == gen
    finally:
        backend.close()
    warnings = [r for r in caplog.records if "state cache unavailable" in r.getMessage()]
    assert len(warnings) == 1, "the cache outage is reported once, not per call"


def test_unreachable_servers_raise_remote_state_errors(tmp_path: object) -> None:
    s3 = open_backend(
        Remote("s3").config(
            s3_bucket="b-x", s3_endpoint_url="http://127.0.0.1:9", transfer_timeout_seconds=2
        ),
        max_attempts=1,
    )
    assert s3 is not None
    with pytest.raises(RemoteStateError, match=r"could not read s3://b-x/rocky/state/k \(endpoint http://127"):
        s3.get("k")
    valkey = open_backend(
        Remote("valkey").config(valkey_url="redis://:sekret@127.0.0.1:9/0", transfer_timeout_seconds=2),
        max_attempts=1,
    )
    assert valkey is not None
    with pytest.raises(RemoteStateError) as info:
        valkey.get("k")
    assert "could not read key 'rocky:state:k' on redis://127.0.0.1:9/0" in str(info.value)
    assert "sekret" not in str(info.value)


def test_missing_bucket_is_named(s3_remote: Remote) -> None:
    backend = open_backend(s3_remote.config(s3_bucket="rocky-no-such-bucket"))
    assert backend is not None
    with pytest.raises(RemoteStateError, match="bucket 'rocky-no-such-bucket' does not exist"):
        backend.get("state.sqlite")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"backend": "gcs"}, "state.backend: state backend 'gcs' is not supported yet"),
        ({"backend": "s3"}, "state.s3_bucket: state backend 's3' needs s3_bucket"),
        ({"backend": "valkey"}, "state.valkey_url: state backend 'valkey' needs valkey_url"),
        ({"backend": "tiered", "s3_bucket": "b"},
         "state.valkey_url: state backend 'tiered' needs valkey_url"),
    ],
)
def test_config_refusals(keys: dict[str, str], message: str) -> None:
    from rocky_engine.config.sections import StateConfig

    with pytest.raises(ConfigError, match=message):
        open_backend(StateConfig.model_validate(keys))


def test_local_has_no_backend() -> None:
    from rocky_engine.config.sections import StateConfig

    assert open_backend(StateConfig()) is None
