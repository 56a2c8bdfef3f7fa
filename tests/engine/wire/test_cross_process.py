"""The files and streams another process reads, through their wire models, with the real processes on both
ends: the child connector's request (written by rocky, read by the program) and result (written by the
program with the wire model, read by rocky), the load document of ``rocky load --connector`` and the
connector sources of ``rocky discover``; discover's failed sources from a (fake) Fivetran API; and round
trips of the documents the engine writes for later readers (incident bundles, spool files, job results)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rocky_engine.wire.connector import ConnectorRequest, ConnectorResultDocument
from rocky_engine.wire.discover import DiscoverResult
from rocky_engine.wire.load import LoadResult
from tests.engine.wire.strict import assert_strict
from tests.fixtures.fake_fivetran import Failure, FakeConnector, FakeFivetran, project_toml, serve
from tests.fixtures.projects import run_rocky

PROGRAM = """\
#!{python}
# A connector written against the wire models: it keeps the request it read, then writes its batch and
# the result document through rocky_engine.wire.connector (what a Python connector author would do).
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from rocky_engine.wire.connector import ConnectorResultDocument, ConnectorState, ResultFileEntry, RESULT_FILE

raw = sys.stdin.read()
keep = sys.argv[1]
with open(keep, "a") as fh:
    fh.write(raw if raw.endswith("\\n") else raw + "\\n")
request = json.loads(raw)
cursor = (request["state"] or {{"value": {{"cursor": 0}}}})["value"]["cursor"]
out = request["output_dir"]
table = pa.table({{"id": pa.array(range(cursor, cursor + 3), pa.int64())}})
pq.write_table(table, os.path.join(out, "part-0.parquet"))
doc = ConnectorResultDocument(
    protocol_version=0,
    files=[ResultFileEntry(path="part-0.parquet", bytes=os.path.getsize(os.path.join(out, "part-0.parquet")),
                           rows=3)],
    state=ConnectorState(schema_version=1, value={{"cursor": cursor + 3}}),
)
with open(os.path.join(out, RESULT_FILE), "w") as fh:
    json.dump(doc.wire(), fh)
with open(keep + ".results", "a") as fh:
    fh.write(json.dumps(doc.wire()) + "\\n")
"""

CONFIG = """\
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[connector.feed]
manifest = "conn/connector.toml"
output_uri = "file://./landing"
target = {{ catalog = "wh", schema = "raw", table = "events" }}

[connector.feed.limits]
cpu_time_secs = 60
"""

MANIFEST = """\
protocol_version = 0
name = "feed"
command = ["./prog.py", "{keep}"]
state_schema_version = 1
egress_hosts = []
"""


@pytest.mark.slow
def test_connector_request_result_and_load_document(tmp_path: Path) -> None:
    conn = tmp_path / "conn"
    conn.mkdir()
    program = conn / "prog.py"
    program.write_text(PROGRAM.format(python=sys.executable))
    program.chmod(0o755)
    keep = tmp_path / "requests.jsonl"
    (conn / "connector.toml").write_text(MANIFEST.format(keep=keep))
    (tmp_path / "rocky.toml").write_text(CONFIG.format())

    docs = []
    for _ in range(2):
        res = run_rocky(["--output", "json", "load", "--connector", "feed"], cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        docs.append(assert_strict(res.json, LoadResult))
    assert [d.connector.status if d.connector else None for d in docs] == ["loaded", "loaded"]
    assert [d.connector.commit_seq_after if d.connector else None for d in docs] == [1, 2]

    lines = keep.read_text().splitlines()
    first, second = (assert_strict(json.loads(line), ConnectorRequest) for line in lines)
    assert first.state is None and first.limits.cpu_time_secs == 60
    assert second.state is not None and second.state.value == {"cursor": 3}
    for line in Path(f"{keep}.results").read_text().splitlines():
        assert_strict(json.loads(line), ConnectorResultDocument)

    discovered = run_rocky(["--output", "json", "discover"], cwd=tmp_path)
    assert discovered.returncode == 0, discovered.stderr
    doc = assert_strict(discovered.json, DiscoverResult)
    [source] = doc.sources
    assert source.source_type == "connector" and source.last_sync_at is not None
    assert source.metadata["commit_seq"] == 2


@pytest.mark.slow
def test_discover_failed_sources_validate_strictly(tmp_path: Path) -> None:
    fake = FakeFivetran()
    fake.add(FakeConnector("conn_ok", "src__acme__shopify", succeeded_at="2026-05-01T10:00:00Z"))
    fake.add(FakeConnector("conn_down", "src__acme__stripe", service="stripe"))
    fake.schema_failures["conn_down"] = Failure(status=429, headers={"Retry-After": "120"})
    with serve(fake) as base_url:
        (tmp_path / "rocky.toml").write_text(project_toml(fake, base_url))
        res = run_rocky(["--output", "json", "discover"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = assert_strict(res.json, DiscoverResult)
    [failed] = doc.failed_sources
    assert (failed.id, failed.schema_, failed.error_class) == ("conn_down", "src__acme__stripe", "rate_limit")
    assert failed.cooldown_seconds == 120
    [ok] = doc.sources
    assert ok.last_sync_at is not None and ok.last_sync_at.isoformat() == "2026-05-01T10:00:00+00:00"


def test_incident_bundle_round_trip(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from rocky_engine.schedule.incidents import IncidentBundle, pointers_for, read_incident, write_incident
    from rocky_engine.wire.incident import IncidentDocument

    at = datetime(2026, 5, 2, 3, tzinfo=UTC)
    bundle = IncidentBundle(
        recorded_at=at, pipeline="orders", source="cron", outcome="partial", logical_ts=None,
        submission_id="ab" * 16, exit_code=None, attempts=None, consecutive_failures=2,
        pointers=pointers_for(config_path=Path("/p/rocky.toml"), submission_id="s", since=at, resident=True,
                              run_id="run-1"),
    )
    path = write_incident(tmp_path, bundle)
    raw = json.loads(path.read_text())
    # unknown facts are null, never left out
    assert raw["logical_ts"] is None and raw["exit_code"] is None and raw["attempts"] is None
    assert assert_strict(raw, IncidentDocument) == read_incident(path)
    assert [p.kind for p in read_incident(path).pointers] == ["history", "run", "job", "schedule"]


def test_a_spool_file_that_is_not_a_demand_is_reported_not_listed(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from rocky_engine.schedule.spool import list_demands, write_demand

    spool = tmp_path / "pending-demands"
    write_demand(spool, pipeline="orders", body=b"x", delivery_id=None, now=datetime(2026, 5, 2, tzinfo=UTC))
    stray = {"demand_uid": "u", "accepted_at": "2026-05-02T00:00:00Z"}
    (spool / "b-stray.json").write_text(json.dumps(stray))
    (spool / "b-torn.json").write_text('{"demand_uid": ')
    listing = list_demands(spool)
    assert [d.pipeline for d in listing.demands] == ["orders"]
    assert len(listing.errors) == 2
    assert any("b-stray.json: pipeline: Field required" in e for e in listing.errors)
    assert any("b-torn.json" in e and "Invalid JSON" in e for e in listing.errors)


def test_job_results_round_trip_through_the_store(tmp_path: Path) -> None:
    """A job's result is stored as its wire document and read back through the same model."""
    from datetime import UTC, datetime

    from rocky_engine.schedule.spawner import ChildResult
    from rocky_engine.server.job_results import finished_row, job_wire, recovered_row
    from rocky_engine.state.jobs import JobRepo, JobRow
    from rocky_engine.state.store import StateStore
    from rocky_engine.wire.jobs import JobDocument

    now = datetime(2026, 5, 2, 3, tzinfo=UTC)
    with StateStore.open(tmp_path / "s.db", writer=True) as store:
        row = JobRow(job_id="j1", kind="run", state="running", submitted_at=now, started_at=now,
                     pipeline="orders", request={"pipeline": "orders"})
        done = finished_row(row, ChildResult(exit_code=2, duration_ms=5, started=True, pid=7), store, now,
                            output={"command": "run", "status": "PartialFailure"})
        lost = recovered_row(store, JobRow(job_id="j2", kind="schedule", state="running", submitted_at=now),
                             now)
        JobRepo(store).upsert(done)
        JobRepo(store).upsert(lost)
        stored = {r.job_id: r for r in JobRepo(store).list(10)}
    first = assert_strict(job_wire(stored["j1"]).wire(), JobDocument)
    assert first.result is not None and (first.result.outcome, first.result.exit_code) == ("partial", 2)
    assert first.error == "partial success: some models failed (exit 2)"
    second = assert_strict(job_wire(stored["j2"]).wire(), JobDocument)
    assert second.result is not None and second.result.recovered and second.result.exit_code is None


def test_tick_heartbeat_file_is_read_by_another_process(tmp_path: Path) -> None:
    """The heartbeat a tick writes, as a separate ``rocky doctor``-like reader sees it."""
    import os
    import subprocess

    from rocky_engine.schedule.tick_lock import HEARTBEAT_NAME, TickLock
    from rocky_engine.wire.schedule import TickHeartbeat

    lock = TickLock(tmp_path, wall=lambda: 1_780_000_000.0)
    assert lock.acquire() == "acquired"
    try:
        held = assert_strict(json.loads((tmp_path / HEARTBEAT_NAME).read_text()), TickHeartbeat)
        assert (held.pid, held.acquired_at, held.overridden) == (os.getpid(), 1_780_000_000.0, False)
        probe = (
            "import sys; from pathlib import Path\n"
            "from rocky_engine.schedule.tick_lock import inspect_tick_lock\n"
            "info = inspect_tick_lock(Path(sys.argv[1]), wall=lambda: 1_780_000_000.0 + 5)\n"
            "print(info.state, info.holder_pid)\n"
        )
        seen = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                              check=True).stdout.split()
        assert seen[1] == str(os.getpid())
    finally:
        lock.release()
    released = assert_strict(json.loads((tmp_path / HEARTBEAT_NAME).read_text()), TickHeartbeat)
    assert released.released is True and released.hostname is None


def test_running_child_registry_file(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from rocky_engine.schedule.claim_lifecycle import ChildRegistry
    from rocky_engine.wire.schedule import RunningChild

    registry = ChildRegistry(tmp_path)
    registry.register("sub-1", 4242, "orders", datetime(2026, 5, 2, 3, tzinfo=UTC))
    doc = assert_strict(json.loads((registry.directory / "sub-1.json").read_text()), RunningChild)
    assert (doc.pid, doc.pipeline, doc.started_at) == (4242, "orders", "2026-05-02T03:00:00.000Z")
    (registry.directory / "sub-2.json").write_text('{"pid": "not a pid"}')
    assert not registry.alive("sub-2")  # a file that does not read is no live child


def test_invalid_config_and_critical_doctor_documents(tmp_path: Path) -> None:
    from rocky_engine.wire.doctor import DoctorResult
    from rocky_engine.wire.validate import ValidateResult

    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n\n[pipeline.t]\ntype = "transformation"\n'
        '[pipeline.t.schedule]\ncron = "61 * * * *"\n'
    )
    res = run_rocky(["--output", "json", "validate"], cwd=tmp_path)
    assert res.returncode == 1
    doc = assert_strict(res.json, ValidateResult)
    errors = [m.field for m in doc.messages if m.severity == "error"]
    assert not doc.valid and "pipeline.t.schedule.cron" in errors
    (tmp_path / "rocky.toml").write_text("[pipeline.t\n")
    res = run_rocky(["--output", "json", "doctor"], cwd=tmp_path)
    assert res.returncode == 3
    report = assert_strict(res.json, DoctorResult)
    assert report.critical and report.checks[0].name == "config" and report.suggestions
