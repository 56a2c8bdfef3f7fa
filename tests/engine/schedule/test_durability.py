"""Durable writes of the scheduler, seen through ``fsync_spy``: the file AND its directory are synced
before the function returns (a webhook's 202 and an incident bundle must survive a power cut)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from rocky_engine.schedule.incidents import IncidentBundle, pointers_for, write_incident
from rocky_engine.schedule.spool import consume, list_demands, spool_dir_of, write_demand
from tests.engine.schedule.kit import T0
from tests.fixtures.fsync_spy import FsyncSpy


def test_write_demand_syncs_the_file_and_the_directory_before_it_returns(
    tmp_path: Path, fsync_spy: FsyncSpy
) -> None:
    spool = spool_dir_of(tmp_path / ".rocky")
    w = write_demand(spool, pipeline="orders", body=b'{"x":1}', delivery_id="evt-1", now=T0)
    assert w.status == "accepted"
    assert fsync_spy.file_synced(w.path), fsync_spy.events  # the bytes, before the name can be seen
    assert fsync_spy.dir_synced_with(spool, w.path.name), fsync_spy.events  # the name itself


def test_consume_makes_the_removal_durable(tmp_path: Path, fsync_spy: FsyncSpy) -> None:
    spool = spool_dir_of(tmp_path / ".rocky")
    w = write_demand(spool, pipeline="orders", body=b"", delivery_id=None, now=T0)
    [demand] = list_demands(spool).demands
    fsync_spy.clear()
    consume(spool, demand, T0)
    assert fsync_spy.dir_synced_without(spool, w.path.name), fsync_spy.events


def test_incident_bundle_syncs_the_file_and_the_directory(tmp_path: Path, fsync_spy: FsyncSpy) -> None:
    bundle = IncidentBundle(
        recorded_at=T0 + timedelta(minutes=1), pipeline="orders", source="cron", outcome="failure",
        logical_ts=T0, submission_id="ab" * 16, exit_code=1, attempts=1, consecutive_failures=1,
        pointers=pointers_for(config_path=Path("/srv/a/rocky.toml"), submission_id="s1", since=T0,
                              resident=False),
    )
    directory = tmp_path / "incidents"
    path = write_incident(directory, bundle)
    assert fsync_spy.file_synced(path), fsync_spy.events
    assert fsync_spy.dir_synced_with(directory, path.name), fsync_spy.events
