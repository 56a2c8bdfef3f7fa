"""The doctor checks of remote state: the state_rw probe and the state_concurrency case."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from rocky_engine.config.sections import StateConfig
from rocky_engine.state.remote.health import check_state_concurrency, check_state_rw
from tests.engine.state.remote.conftest import Machine, Remote
from tests.fixtures.redis import RedisServer


@pytest.mark.services
@pytest.mark.parametrize("backend", ["s3", "valkey", "tiered"])
def test_state_rw_probe_is_healthy_and_leaves_nothing_behind(
    backend: str, request: pytest.FixtureRequest
) -> None:
    remote: Remote = request.getfixturevalue(f"{backend}_remote")
    finding = check_state_rw(remote.config())
    assert finding.status == "healthy", finding.message
    assert finding.message.startswith("put/get/delete probe on ")
    if remote.s3 is not None:
        listed = remote.s3.client().list_objects_v2(Bucket=remote.s3.bucket, Prefix=remote.s3_prefix)
        assert listed.get("KeyCount", 0) == 0
    if remote.redis is not None:
        assert remote.redis.client().keys(f"{remote.redis_prefix}*") == []


@pytest.mark.services
def test_state_rw_unreachable_is_critical() -> None:
    config = StateConfig(
        backend="valkey", valkey_url="redis://:hunter2@127.0.0.1:9/0", transfer_timeout_seconds=3
    )
    finding = check_state_rw(config)
    assert finding.status == "critical"
    assert finding.message.startswith("cannot read and write the valkey state backend: could not write key")
    assert "hunter2" not in finding.message
    assert finding.suggestions


@pytest.mark.services
def test_state_rw_tiered_with_its_cache_down_is_a_warning(
    s3_remote: Remote, redis_factory: Callable[[], RedisServer]
) -> None:
    server = redis_factory()
    remote = Remote("tiered", s3=s3_remote.s3, s3_prefix=s3_remote.s3_prefix, redis=server, redis_prefix="p:")
    server.stop()
    finding = check_state_rw(remote.config(transfer_timeout_seconds=3))
    assert finding.status == "warning"
    assert "but the valkey cache does not answer" in finding.message


def test_state_rw_refuses_gcs_and_local_is_healthy() -> None:
    gcs = check_state_rw(StateConfig(backend="gcs"))
    assert (gcs.status, gcs.message) == (
        "critical", "state.backend: state backend 'gcs' is not supported yet; use local, s3, valkey or tiered"
    )
    assert check_state_rw(StateConfig()).status == "healthy"


@pytest.mark.parametrize(
    ("keys", "status", "phrases"),
    [
        ({"backend": "local", "concurrency_control": "cas"}, "healthy", ["no remote write at all"]),
        ({"backend": "s3", "s3_bucket": "b"}, "warning",
         ['backend = s3, concurrency_control = "off"', "the last writer wins silently"]),
        ({"backend": "tiered", "s3_bucket": "b", "valkey_url": "redis://h", "concurrency_control": "cas"},
         "warning", ['backend = tiered, concurrency_control = "cas"', "fails closed",
                     "cas does not stop the second run from happening"]),
        ({"backend": "valkey", "valkey_url": "redis://h", "concurrency_control": "cas"}, "warning",
         ["backend = valkey", "is not available there and falls back", "last writer wins silently"]),
        ({"backend": "valkey", "valkey_url": "redis://h"}, "warning",
         ['backend = valkey, concurrency_control = "off"']),
        ({"backend": "gcs"}, "critical", ["not supported yet"]),
    ],
)
def test_state_concurrency_names_the_contract_case(
    keys: dict[str, str], status: str, phrases: list[str]
) -> None:
    finding = check_state_concurrency(StateConfig.model_validate(keys))
    assert finding.status == status
    for phrase in phrases:
        assert phrase in finding.message
    if status == "warning":
        assert any("one scheduler per project" in s for s in finding.suggestions)


@pytest.mark.services
@pytest.mark.slow
def test_rocky_doctor_runs_both_checks_on_a_remote_backend(
    s3_remote: Remote, machines: Callable[[str], Machine]
) -> None:
    m = machines("m")
    m.write(s3_remote.state_toml(concurrency_control="cas"))
    result = m.rocky("doctor", "-o", "json")
    doc = json.loads(result.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["state_rw"]["status"] == "healthy", checks["state_rw"]
    assert checks["state_concurrency"]["status"] == "warning"
    assert "fails closed" in checks["state_concurrency"]["message"]
    only = m.rocky("doctor", "--check", "state_rw", "-o", "json")
    assert [c["name"] for c in json.loads(only.stdout)["checks"]] == ["state_rw"]
