"""Idempotency keys and resume of replication runs, through the real CLI and real state files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state.store import StateStore
from tests.engine.replication.conftest import ReplicationProject


@pytest.fixture
def rp(tmp_path: Path) -> ReplicationProject:
    project = ReplicationProject(tmp_path)
    project.configure()
    project.source_table("src__orders", "orders", rows=5)
    project.source_table("src__payments", "payments", rows=5)
    return project


def _run(
    rp: ReplicationProject, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    result = rp.cli("run", "--pipeline", "raw", "--output", "json", *args, env=env)
    assert result.stdout, result.stderr
    return result.returncode, result.json


def _entry(rp: ReplicationProject, key: str) -> tuple[str, str]:
    with rp.store() as store:
        entry = store.idempotency.get(key)
    assert entry is not None
    return entry.state, entry.run_id


def _record_count(rp: ReplicationProject) -> int:
    with rp.store() as store:
        return len(store.runs.list())


def _break_payments(rp: ReplicationProject) -> None:
    rp.sql("DROP TABLE src__payments.payments", "CREATE TABLE src__payments.payments AS SELECT 1 AS id")


def _fix_payments(rp: ReplicationProject) -> None:
    rp.sql("DROP TABLE src__payments.payments")
    rp.source_table("src__payments", "payments", rows=5)


# --------------------------------------------------------------------------- idempotency


def test_key_claims_then_skips_a_repeat(rp: ReplicationProject) -> None:
    code, first = _run(rp, "--idempotency-key", "nightly-1")
    assert code == 0 and first["status"] == "Success" and first["idempotency_key"] == "nightly-1"
    assert _entry(rp, "nightly-1") == ("succeeded", first["run_id"])
    with rp.store() as store:
        record = store.runs.get(str(first["run_id"]))
    assert record is not None and record.idempotency_key == "nightly-1"

    code, second = _run(rp, "--idempotency-key", "nightly-1")
    assert code == 0
    assert second["status"] == "SkippedIdempotent"
    assert second["skipped_by_run_id"] == first["run_id"]
    assert second["idempotency_key"] == "nightly-1"
    assert "run_id" not in second and second["materializations"] == []
    assert _record_count(rp) == 1  # a skip writes no run record


def test_key_from_the_environment(rp: ReplicationProject) -> None:
    _run(rp, env={"ROCKY_IDEMPOTENCY_KEY": "env-key"})
    code, doc = _run(rp, env={"ROCKY_IDEMPOTENCY_KEY": "env-key"})
    assert code == 0 and doc["status"] == "SkippedIdempotent"


def test_failed_key_runs_again_under_dedup_on_success(rp: ReplicationProject) -> None:
    _break_payments(rp)
    code, failed = _run(rp, "--idempotency-key", "k")
    assert code == 2 and failed["status"] == "PartialFailure"
    assert _entry(rp, "k") == ("failed", failed["run_id"])
    _fix_payments(rp)
    code, retried = _run(rp, "--idempotency-key", "k")
    assert code == 0 and retried["status"] == "Success"
    assert _entry(rp, "k") == ("succeeded", retried["run_id"])


def test_failed_key_is_skipped_under_dedup_on_any(rp: ReplicationProject) -> None:
    rp.config.write_text(rp.config.read_text() + '\n[state.idempotency]\ndedup_on = "any"\n')
    _break_payments(rp)
    _, failed = _run(rp, "--idempotency-key", "k")
    _fix_payments(rp)
    code, skipped = _run(rp, "--idempotency-key", "k")
    assert code == 0 and skipped["status"] == "SkippedIdempotent"
    assert skipped["skipped_by_run_id"] == failed["run_id"]


def test_live_in_flight_key_is_skipped(rp: ReplicationProject) -> None:
    with StateStore.open(rp.state_path) as store:
        store.idempotency.claim("k", "run-20260101-000000-000", now=datetime.now(UTC), ttl_hours=24)
    code, doc = _run(rp, "--idempotency-key", "k")
    assert code == 0 and doc["status"] == "SkippedInFlight"
    assert doc["skipped_by_run_id"] == "run-20260101-000000-000"
    assert _record_count(rp) == 0


def test_expired_in_flight_key_is_adopted(rp: ReplicationProject) -> None:
    with StateStore.open(rp.state_path) as store:
        store.idempotency.claim("k", "run-dead", now=datetime.now(UTC) - timedelta(hours=48), ttl_hours=24)
    result = rp.cli("run", "--pipeline", "raw", "-o", "json", "--idempotency-key", "k")
    assert result.returncode == 0 and result.json["status"] == "Success"
    assert "the in-flight claim of run-dead expired; this run takes it over" in result.stderr
    assert _entry(rp, "k") == ("succeeded", result.json["run_id"])


def test_key_with_resume_is_an_error(rp: ReplicationProject) -> None:
    for flags in (["--resume-latest"], ["--resume", "run-x"]):
        result = rp.cli("run", "--pipeline", "raw", "--idempotency-key", "k", *flags)
        assert result.returncode == 1
        assert "error: --idempotency-key cannot be combined with --resume/--resume-latest" in result.stderr
    assert not rp.state_path.exists()


def test_an_exception_finalizes_the_key_as_failed(rp: ReplicationProject) -> None:
    # A routing collision is a config error raised after the claim: the key must not stay in flight.
    rp.configure(schema_template="staging")
    rp.source_table("src__more", "orders", rows=1)
    result = rp.cli("run", "--pipeline", "raw", "--idempotency-key", "k")
    assert result.returncode == 1 and "both route to" in result.stderr
    assert _entry(rp, "k")[0] == "failed"


def _slow(rp: ReplicationProject, tables: int, sleep: float) -> None:
    """``tables`` tables copied one at a time, each after a ``sleep`` s before_materialize hook."""
    rp.configure(sections=f"""
        [pipeline.raw.execution]
        concurrency = 1

        [[hook.on_before_materialize]]
        command = "sleep {sleep}"
    """)
    rp.sql("CREATE SCHEMA src__many", *(
        f"CREATE TABLE src__many.t{i:02d} AS SELECT range AS id, "
        f"TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range({10 + i})" for i in range(tables)
    ))


@pytest.mark.slow
def test_two_concurrent_runs_with_one_key_run_once(rp: ReplicationProject) -> None:
    _slow(rp, tables=10, sleep=0.1)
    args = ("run", "--pipeline", "raw", "--output", "json", "--idempotency-key", "race")
    procs = [rp.popen(*args), rp.popen(*args)]
    results = [(p.wait(timeout=120), p.communicate()) for p in procs]
    docs = [json.loads(out) for _, (out, _) in results]
    statuses = sorted(str(d["status"]) for d in docs)
    assert [code for code, _ in results] == [0, 0], [err for _, (_, err) in results]
    assert statuses[1] == "Success"
    assert statuses[0] in ("SkippedInFlight", "SkippedIdempotent")
    winner = next(d for d in docs if d["status"] == "Success")
    loser = next(d for d in docs if d["status"] != "Success")
    assert loser["skipped_by_run_id"] == winner["run_id"]
    assert _record_count(rp) == 1
    assert rp.count("stg__many.t09") == 19


@pytest.mark.slow
def test_sigterm_finalizes_the_key_and_exits_130(rp: ReplicationProject) -> None:
    _slow(rp, tables=20, sleep=0.1)
    proc = rp.popen("run", "--pipeline", "raw", "--output", "json", "--idempotency-key", "term")
    _wait_for_progress(rp.state_path, 2)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    assert code == 130
    state, _ = _entry(rp, "term")
    assert state == "failed"


# --------------------------------------------------------------------------- resume


def test_resume_latest_copies_only_what_failed(rp: ReplicationProject) -> None:
    _break_payments(rp)
    code, first = _run(rp)
    assert code == 2
    _fix_payments(rp)
    code, resumed = _run(rp, "--resume-latest")
    assert code == 0 and resumed["status"] == "Success"
    assert resumed["resumed_from"] == first["run_id"]
    assert resumed["tables_skipped"] == 1
    assert resumed["run_id"] != first["run_id"]
    assert [m["asset_key"] for m in resumed["materializations"]] == [["duckdb", "payments", "payments"]]
    assert rp.count("stg__payments.payments") == 5 and rp.count("stg__orders.orders") == 5
    with rp.store() as store:
        record = store.runs.get(str(resumed["run_id"]))
    assert record is not None and record.extra["resumed_from"] == first["run_id"]

    # The resumed run succeeded: nothing is left to resume, the next --resume-latest is an ordinary
    # incremental run (issue 13 item 10) that says why.
    code, again = _run(rp, "--resume-latest")
    assert code == 0 and again["tables_copied"] == 2 and "tables_skipped" not in again
    assert "resumed_from" not in again and str(resumed["run_id"]) in str(again["resume_note"])


def test_resume_by_id(rp: ReplicationProject) -> None:
    _break_payments(rp)
    _, first = _run(rp)
    _run(rp)  # a later run: --resume ID still resumes the named one
    _fix_payments(rp)
    code, resumed = _run(rp, "--resume", str(first["run_id"]))
    assert code == 0 and resumed["resumed_from"] == first["run_id"] and resumed["tables_skipped"] == 1


def test_resume_unknown_run(rp: ReplicationProject) -> None:
    _run(rp)
    result = rp.cli("run", "--pipeline", "raw", "--resume", "run-x")
    assert result.returncode == 1
    assert (f"error: run 'run-x' not found in the state store at {rp.state_path}; list runs with "
            "`rocky history`") in result.stderr


def test_resume_latest_without_history_copies_everything(rp: ReplicationProject) -> None:
    code, doc = _run(rp, "--resume-latest")
    assert code == 0 and doc["tables_copied"] == 2
    assert "resumed_from" not in doc and "tables_skipped" not in doc


def test_resume_a_run_of_another_pipeline(rp: ReplicationProject) -> None:
    text = rp.config.read_text()
    second = text[text.index("[pipeline.raw]"):].replace("pipeline.raw", "pipeline.raw2")
    rp.config.write_text(text + "\n" + second)
    _, first = _run(rp)
    result = rp.cli("run", "--pipeline", "raw2", "--resume", str(first["run_id"]))
    assert result.returncode == 1
    assert f"error: run '{first['run_id']}' is a run of pipeline 'raw', not 'raw2'" in result.stderr


def test_resume_of_a_transformation_pipeline_is_an_error(tmp_path: Path) -> None:
    rp = ReplicationProject(tmp_path)
    rp.write_config(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n\n[pipeline.models]\ntype = "transformation"\n'
    )
    (tmp_path / "models").mkdir()
    result = rp.cli("run", "--pipeline", "models", "--resume-latest")
    assert result.returncode == 1
    assert ("error: --resume/--resume-latest apply to replication pipelines; 'models' is a transformation "
            "pipeline") in result.stderr


def _wait_for_progress(state: Path, rows: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists():
            try:
                con = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
                try:
                    count = int(con.execute("SELECT count(*) FROM run_progress").fetchone()[0])
                finally:
                    con.close()
                if count >= rows:
                    return count
            except sqlite3.Error:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no {rows} progress rows within {timeout} s")


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_latest(rp: ReplicationProject) -> None:
    _slow(rp, tables=16, sleep=0.1)
    proc = rp.popen("run", "--pipeline", "raw", "--output", "json")
    _wait_for_progress(rp.state_path, 4)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with rp.store() as store:
        assert store.runs.list() == []  # killed: no run record, only progress
        killed = store.progress.latest_run_id("raw")
        assert killed is not None
        done = store.progress.completed_keys(killed)
    assert 4 <= len(done) < 18
    code, resumed = _run(rp, "--resume-latest")
    assert code == 0, resumed
    assert resumed["resumed_from"] == killed and resumed["tables_skipped"] == len(done)
    assert resumed["tables_copied"] == 18 - len(done)
    for i in range(16):
        assert rp.count(f"stg__many.t{i:02d}") == 10 + i  # every table complete, none duplicated
    assert rp.count("stg__orders.orders") == 5 and rp.count("stg__payments.payments") == 5
    # Every table now has its watermark, and a normal run finds nothing new.
    code, after = _run(rp)
    assert code == 0 and all(m["rows_copied"] == 0 for m in after["materializations"])
