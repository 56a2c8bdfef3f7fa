"""Fivetran discovery against a local fake Fivetran API on 127.0.0.1 (real HTTP, real config loading)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.adapters.discovery import FailedSource, open_discovery
from rocky_engine.adapters.fivetran.client import FivetranApiError, retry_after_seconds
from rocky_engine.adapters.fivetran.discovery import FivetranDiscovery, parse_sync_time
from rocky_engine.config import load_config
from rocky_engine.config.pipelines import ReplicationPipeline
from tests.fixtures.fake_fivetran import Failure, FakeConnector, FakeFivetran, project_toml, serve


@pytest.fixture
def fake() -> FakeFivetran:
    fake = FakeFivetran()
    fake.add(FakeConnector("conn_a", "src__acme__shopify", succeeded_at="2026-05-01T10:00:00.000Z"))
    fake.add(
        FakeConnector(
            "conn_b",
            "src__acme__stripe",
            service="stripe",
            succeeded_at="2026-05-01T11:30:00Z",
            tables={"main": ["charges", "refunds", "payouts"]},
            disabled_tables={"payouts"},
        )
    )
    fake.add(FakeConnector("conn_c", "src__globex__shopify", succeeded_at=None))
    fake.add(FakeConnector("conn_x", "other_schema"))  # no prefix: not a source
    fake.add(FakeConnector("conn_m", "src__misfit"))  # prefix but wrong shape: a misfit
    return fake


@pytest.fixture
def base_url(fake: FakeFivetran) -> Iterator[str]:
    with serve(fake) as url:
        yield url


def _discovery(
    tmp_path: Path,
    fake: FakeFivetran,
    base_url: str,
    *,
    retries: int = 0,
    breaker: int = 0,
    secret: str | None = None,
) -> tuple[FivetranDiscovery, ReplicationPipeline]:
    path = tmp_path / "rocky.toml"
    path.write_text(project_toml(fake, base_url, api_secret=secret, retries=retries, breaker=breaker))
    config = load_config(path)
    pipeline = config.pipeline("raw")
    assert isinstance(pipeline, ReplicationPipeline)
    discovery = open_discovery(config, pipeline)
    assert isinstance(discovery, FivetranDiscovery)
    return discovery, pipeline


def test_discovers_connectors_tables_and_sync_times(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    discovery, pipeline = _discovery(tmp_path, fake, base_url)
    try:
        outcome = discovery.discover(pipeline)
    finally:
        discovery.close()
    by_id = {s.id: s for s in outcome.sources}
    assert sorted(by_id) == ["conn_a", "conn_b", "conn_c"]
    a = by_id["conn_a"]
    assert a.schema == "src__acme__shopify"
    assert a.components == {"tenant": "acme", "connector": "shopify"}
    assert a.source_type == "fivetran"
    assert a.last_sync_at == datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    assert [t.name for t in a.tables] == ["customers", "orders"]
    assert a.metadata["service"] == "shopify"
    assert [t.name for t in by_id["conn_b"].tables] == ["charges", "refunds"]  # disabled table left out
    assert by_id["conn_c"].last_sync_at is None
    assert outcome.failed_sources == []
    assert [m.schema for m in outcome.misfits] == ["src__misfit"]
    assert not any("conn_x" in r for r in fake.requests if "schemas" in r)  # never fetched


def test_pagination_follows_next_cursor(tmp_path: Path, fake: FakeFivetran, base_url: str) -> None:
    fake.page_size = 2
    discovery, pipeline = _discovery(tmp_path, fake, base_url)
    outcome = discovery.discover(pipeline)
    discovery.close()
    assert len(outcome.sources) == 3
    assert sum(1 for r in fake.requests if r.startswith("GET /v1/groups/")) == 3


def test_5xx_on_one_connector_is_reported_and_others_still_discovered(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    fake.schema_failures["conn_b"] = Failure(status=503)
    discovery, pipeline = _discovery(tmp_path, fake, base_url, retries=2)
    outcome = discovery.discover(pipeline)
    discovery.close()
    assert sorted(s.id for s in outcome.sources) == ["conn_a", "conn_c"]
    assert outcome.failed_sources == [
        FailedSource(
            id="conn_b",
            schema="src__acme__stripe",
            source_type="fivetran",
            error_class="transient",
            message="Fivetran API schema config of connector conn_b answered HTTP 503: injected 503",
        )
    ]
    # retried per [adapter.fivetran.retry] before giving up: 1 attempt + 2 retries
    assert fake.requests.count("GET /v1/connectors/conn_b/schemas") == 3


def test_transient_5xx_recovers_within_retries(tmp_path: Path, fake: FakeFivetran, base_url: str) -> None:
    fake.schema_failures["conn_a"] = Failure(status=502, times=1)
    discovery, pipeline = _discovery(tmp_path, fake, base_url, retries=1)
    outcome = discovery.discover(pipeline)
    discovery.close()
    assert sorted(s.id for s in outcome.sources) == ["conn_a", "conn_b", "conn_c"]
    assert outcome.failed_sources == []


def test_429_reports_rate_limit_with_cooldown_and_is_not_retried(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    fake.schema_failures["conn_a"] = Failure(status=429, headers={"Retry-After": "120"})
    discovery, pipeline = _discovery(tmp_path, fake, base_url, retries=3)
    outcome = discovery.discover(pipeline)
    discovery.close()
    (failed,) = outcome.failed_sources
    assert (failed.id, failed.error_class, failed.cooldown_seconds) == ("conn_a", "rate_limit", 120)
    assert failed.schema == "src__acme__shopify"
    assert fake.requests.count("GET /v1/connectors/conn_a/schemas") == 1
    assert sorted(s.id for s in outcome.sources) == ["conn_b", "conn_c"]


def test_timeout_is_classified_as_timeout(
    tmp_path: Path, fake: FakeFivetran, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Generous: the healthy connectors must still answer in time on a loaded machine.
    monkeypatch.setattr("rocky_engine.adapters.fivetran.client.REQUEST_TIMEOUT_SECONDS", 1.0)
    fake.schema_failures["conn_c"] = Failure(status=200, delay=3.0)
    discovery, pipeline = _discovery(tmp_path, fake, base_url)
    outcome = discovery.discover(pipeline)
    discovery.close()
    (failed,) = outcome.failed_sources
    assert (failed.id, failed.error_class) == ("conn_c", "timeout")
    assert "timed out" in failed.message


def test_auth_failure_on_listing_fails_the_whole_discovery(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    discovery, pipeline = _discovery(tmp_path, fake, base_url, secret="wrong")
    with pytest.raises(FivetranApiError) as err:
        discovery.discover(pipeline)
    discovery.close()
    assert err.value.error_class == "auth"
    assert "HTTP 401" in str(err.value)
    assert "wrong" not in str(err.value)  # never the credential


def test_auth_failure_on_one_connector_is_per_connector(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    fake.schema_failures["conn_c"] = Failure(status=403)
    discovery, pipeline = _discovery(tmp_path, fake, base_url)
    outcome = discovery.discover(pipeline)
    discovery.close()
    assert [(f.id, f.error_class) for f in outcome.failed_sources] == [("conn_c", "auth")]


def test_listing_5xx_exhausts_retries_then_raises(tmp_path: Path, fake: FakeFivetran, base_url: str) -> None:
    fake.list_failure = Failure(status=500)
    discovery, pipeline = _discovery(tmp_path, fake, base_url, retries=1)
    with pytest.raises(FivetranApiError, match="list of connectors of group dest_1 answered HTTP 500"):
        discovery.discover(pipeline)
    discovery.close()


def test_open_breaker_reports_remaining_connectors_as_transient(
    tmp_path: Path, fake: FakeFivetran, base_url: str
) -> None:
    for cid in ("conn_a", "conn_b", "conn_c"):
        fake.schema_failures[cid] = Failure(status=500)
    discovery, pipeline = _discovery(tmp_path, fake, base_url, retries=0, breaker=1)
    outcome = discovery.discover(pipeline)
    discovery.close()
    assert sorted(f.id for f in outcome.failed_sources) == ["conn_a", "conn_b", "conn_c"]
    assert {f.error_class for f in outcome.failed_sources} == {"transient"}
    assert outcome.sources == []


def test_retry_after_http_date_and_garbage() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    date = (now + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after_seconds(date, now=lambda: now) == 30
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_sync_time_parsing() -> None:
    assert parse_sync_time("2026-05-01T10:00:00+02:00") == datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    assert parse_sync_time("2026-05-01T10:00:00") == datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    assert parse_sync_time(None) is None
    assert parse_sync_time("not a date") is None
