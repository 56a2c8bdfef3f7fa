"""``rocky load --connector``: whole runs with real child programs, the JSON document, state and claims."""

from __future__ import annotations

import json
import stat
from datetime import datetime
from pathlib import Path

import pytest

from tests.engine.connectors.kit import ConnectorProject


def test_success_document_state_and_scratch(cp: ConnectorProject) -> None:
    cp.setup("ok", "rows=4", "files=2")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert doc["command"] == "load" and doc["pipeline"] == "fake" and doc["status"] == "Success"
    assert doc["files_loaded"] == 2 and doc["files_failed"] == 0 and doc["total_rows"] == 8
    assert doc["total_bytes"] == sum(f["bytes"] for f in doc["files"])
    assert [f["path"] for f in doc["files"]] == ["part-0.parquet", "part-1.parquet"]
    assert doc["connector"] == {
        "name": "fake", "status": "loaded", "attempts": 1, "commit_seq_before": 0, "commit_seq_after": 1,
        "adopted_expired_claim": False, "egress_hosts": ["api.example.com"],
    }
    assert cp.rows("SELECT min(id), max(id), count(*) FROM wh.raw.events") == [(0, 7, 8)]
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1 and json.loads(state["value"]) == {"cursor": 8}
    assert cp.claims()["connector:fake:0"]["state"] == "succeeded"
    assert cp.scratch_dirs() == []  # removed after the state commit
    assert cp.relations() == ["events"]  # the staging relation is gone
    assert "api.example.com" in res.stderr  # egress hosts are logged

    again = cp.load()
    assert again.returncode == 0, again.stderr
    assert again.connector["commit_seq_before"] == 1 and again.connector["commit_seq_after"] == 2
    assert cp.rows("SELECT min(id), max(id), count(*) FROM wh.raw.events") == [(0, 15, 16)]
    assert cp.claims()["connector:fake:1"]["state"] == "succeeded"


def test_keep_scratch_and_owner_only_mode(cp: ConnectorProject) -> None:
    cp.setup("ok", keep_scratch=True)
    res = cp.load()
    assert res.returncode == 0, res.stderr
    (scratch,) = cp.scratch_dirs()
    assert scratch.name.endswith("-1") and len(scratch.name) == 34
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700
    assert (scratch / "_rocky_result.json").exists()


def test_empty_result_saves_state_and_loads_nothing(cp: ConnectorProject) -> None:
    cp.setup("ok", "files=0")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert res.json["files"] == [] and res.json["total_rows"] == 0
    assert res.connector["status"] == "loaded" and res.connector["commit_seq_after"] == 1
    assert not (cp.root / "wh.duckdb").exists()  # the warehouse was never opened
    assert cp.state() is not None


def test_fails_then_succeeds_on_retry(cp: ConnectorProject) -> None:
    cp.setup("fail_then_ok", f"marker={cp.marker}", retries=1)
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert res.connector["attempts"] == 2 and res.connector["status"] == "loaded"
    assert "attempt 1 of 2 failed: the program exited with code 3" in res.stderr
    assert "first attempt fails on purpose" in res.stderr  # the program's stderr reaches the log
    assert cp.count() == 3
    assert cp.scratch_dirs() == []


def test_failure_frees_the_claim_and_the_next_run_retries_the_batch(cp: ConnectorProject) -> None:
    cp.setup("fail_then_ok", f"marker={cp.marker}", retries=0)
    res = cp.load()
    assert res.returncode == 1
    assert res.json["status"] == "Failure"
    assert res.connector["status"] == "failed" and res.connector["attempts"] == 1
    assert res.connector["error"] == "all 1 attempt(s) failed; the last one: the program exited with code 3"
    assert res.json["files"] == []
    assert cp.claims()["connector:fake:0"]["state"] == "failed"
    assert cp.state() is None
    assert cp.scratch_dirs() == []  # a failed attempt's scratch is removed
    again = cp.load()
    assert again.returncode == 0, again.stderr
    assert again.connector["commit_seq_before"] == 0 and again.connector["commit_seq_after"] == 1


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("dotdot", "contains '..'"),
        ("absolute", "is absolute; paths are relative to output_dir"),
        ("symlink_out", "outside output_dir (a symlink out of scratch)"),
        ("lie_bytes", "but the result says"),
        ("lie_rows", "holds 3 rows in its footer, but the result says 4"),
        ("not_parquet", "is not a Parquet file (it does not end with the PAR1 marker)"),
    ],
)
def test_bad_results_fail_the_attempt(cp: ConnectorProject, tmp_path: Path, mode: str, message: str) -> None:
    outside = tmp_path / "outside.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2, 3]}), outside)
    cp.setup(mode, f"target={outside}")
    res = cp.load()
    assert res.returncode == 1
    error = res.connector["error"]
    assert error.startswith("all 1 attempt(s) failed; the last one: the result was refused: ")
    assert message in error
    assert not (cp.root / "wh.duckdb").exists()
    assert cp.state() is None and cp.scratch_dirs() == []
    assert outside.exists()  # never touched


def test_oversized_state_is_refused(cp: ConnectorProject) -> None:
    cp.setup("big_state", f"size={2 * 1024 * 1024}")
    res = cp.load()
    assert res.returncode == 1
    assert "more than the 1 MiB (1048576 bytes) allowed" in res.connector["error"]
    assert cp.state() is None


def test_file_over_output_bytes_is_killed_by_rlimit_fsize(cp: ConnectorProject) -> None:
    cp.setup("over_cap", "n=200", extra="[connector.fake.limits]\noutput_bytes = 20000\n")
    res = cp.load()
    assert res.returncode == 1
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the program being killed
    assert res.connector["error"].endswith("the program exited with code 1")
    assert "File too large" in res.stderr
    assert not (cp.root / "wh.duckdb").exists()


def test_secret_values_are_redacted_from_the_log(cp: ConnectorProject) -> None:
    secret = "s3cr3t-value-that-is-long"
    cp.setup("print_secret", "name=ROCKYTEST_TOKEN", secrets=["ROCKYTEST_TOKEN", "ROCKYTEST_SHORT"])
    res = cp.load(env={"ROCKYTEST_TOKEN": secret, "ROCKYTEST_SHORT": "short"})
    assert res.returncode == 0, res.stderr
    assert secret not in res.stderr and secret not in res.stdout
    assert "the secret is ${ROCKYTEST_TOKEN} (stdout)" in res.stderr
    assert "the secret is ${ROCKYTEST_TOKEN} (stderr)" in res.stderr
    # the program's output never reaches rocky's stdout, which stays one JSON document
    assert "the secret is" not in res.stdout


def test_short_secrets_are_not_redacted_known_gap(cp: ConnectorProject) -> None:
    cp.setup("print_secret", "name=ROCKYTEST_SHORT", secrets=["ROCKYTEST_SHORT"])
    res = cp.load(env={"ROCKYTEST_SHORT": "1234567"})
    assert res.returncode == 0, res.stderr
    assert "the secret is 1234567 (stdout)" in res.stderr


def test_program_environment_and_limits(cp: ConnectorProject) -> None:
    cp.setup(
        "env", f"marker={cp.marker}", secrets=["ROCKYTEST_TOKEN"],
        extra="[connector.fake.limits]\ncpu_time_secs = 100\nmemory_bytes = 8000000000\n"
              "output_bytes = 123456789\n",
    )
    res = cp.load(env={"ROCKYTEST_TOKEN": "token-123456", "AWS_SECRET_ACCESS_KEY": "nope",
                       "DATABRICKS_TOKEN": "nope", "LANG": "C.UTF-8"})
    assert res.returncode == 0, res.stderr
    seen = json.loads(cp.marker.read_text())
    env = seen["env"]
    scratch = seen["request"]["output_dir"]
    assert set(env) <= {"PATH", "LANG", "ROCKYTEST_TOKEN", "ROCKY_RUN_ID", "HOME", "TMPDIR", "LC_CTYPE"}
    assert env["ROCKYTEST_TOKEN"] == "token-123456" and env["LANG"] == "C.UTF-8"
    assert env["HOME"] == env["TMPDIR"] == seen["cwd"] == scratch
    assert env["ROCKY_RUN_ID"] == seen["request"]["run_id"]
    assert Path(scratch).name == f"{env['ROCKY_RUN_ID']}-1"
    assert seen["mode"] == 0o700
    assert seen["pgid_is_pid"] is True
    assert seen["limits"]["RLIMIT_CPU"] == [100, 105]
    assert seen["limits"]["RLIMIT_AS"] == [8000000000, 8000000000]
    assert seen["limits"]["RLIMIT_FSIZE"] == [123456789, 123456789]
    request = seen["request"]
    assert request["protocol_version"] == 0 and request["state"] is None
    assert request["limits"] == {"wall_time_secs": 3600, "output_bytes": 123456789, "cpu_time_secs": 100,
                                 "memory_bytes": 8000000000}


def test_lang_is_not_invented(cp: ConnectorProject) -> None:
    import os
    import subprocess
    import sys

    cp.setup("env", f"marker={cp.marker}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKY_", "LANG", "LC_"))}
    subprocess.run([sys.executable, "-m", "rocky_engine.cli.main", "-c", str(cp.config), "--output", "json",
                    "load", "--connector", "fake"], env=env, cwd=cp.root, check=True, capture_output=True)
    assert "LANG" not in json.loads(cp.marker.read_text())["env"]


def test_state_versions(cp: ConnectorProject) -> None:
    cp.setup("ok")
    assert cp.load().returncode == 0
    # the manifest moves to state version 2: the saved version-1 state is handed over unchanged
    cp.setup("env", f"marker={cp.marker}", state_version=2)
    res = cp.load()
    assert res.returncode == 1  # the env program answers with version 1 state, which v2 refuses
    assert json.loads(cp.marker.read_text())["request"]["state"] == {"schema_version": 1,
                                                                      "value": {"cursor": 3}}
    error = res.connector["error"]
    assert "state.schema_version is 1, but the manifest says state_schema_version = 2" in error
    cp.setup("state_version", "v=2", state_version=2)
    assert cp.load().returncode == 0
    # an older manifest meets the newer state: refused before the program starts
    cp.marker.unlink()
    cp.setup("env", f"marker={cp.marker}", state_version=1)
    res = cp.load()
    assert res.returncode == 1
    assert ("the saved state has schema_version 2, newer than the manifest's state_schema_version 1; "
            "refusing to start the program") in res.connector["error"]
    assert not cp.marker.exists()
    assert res.connector["attempts"] == 0


def test_files_with_different_columns_fail_and_keep_scratch(cp: ConnectorProject) -> None:
    cp.setup("mixed")
    res = cp.load()
    assert res.returncode == 1
    error = res.connector["error"]
    assert "all files of a batch must have the same columns: 'b.parquet' differs from 'a.parquet' " \
           "(extra x)" in error
    assert res.json["files_failed"] == 2 and res.json["files_loaded"] == 0
    assert all(f["rows"] == 0 and f["bytes"] == 0 and f["error"] for f in res.json["files"])
    assert cp.relations() == []  # no target, no staging left
    assert cp.claims()["connector:fake:0"]["state"] == "failed"
    assert len(cp.scratch_dirs()) == 1  # the child succeeded: its scratch is kept


def test_reordered_columns_land_in_the_right_columns(cp: ConnectorProject) -> None:
    cp.setup("reordered")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert cp.rows("SELECT id, name FROM wh.raw.events ORDER BY id") == [(1, "a"), (2, "b")]


def test_skip_when_another_run_holds_the_claim(cp: ConnectorProject) -> None:
    cp.setup("env", f"marker={cp.marker}")
    _claim(cp, "connector:fake:0", "in_flight", "2999-01-01T00:00:00.000000Z")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert res.json["status"] == "Success"
    assert res.connector["status"] == "skipped" and res.connector["attempts"] == 0
    assert "error" not in res.connector
    assert not cp.marker.exists()
    assert "is claimed by run other-run, still in flight; skipping" in res.stderr


def test_finished_claim_without_state_move_fails(cp: ConnectorProject) -> None:
    cp.setup("env", f"marker={cp.marker}")
    _claim(cp, "connector:fake:0", "succeeded", "2999-01-01T00:00:00.000000Z")
    res = cp.load()
    assert res.returncode == 1
    assert ("batch connector:fake:0 was already finished by run other-run, but the saved state is still at "
            "commit_seq 0; the state may have been reset or restored") in res.connector["error"]
    assert not cp.marker.exists()


def test_expired_in_flight_claim_is_adopted(cp: ConnectorProject) -> None:
    cp.setup("ok")
    _claim(cp, "connector:fake:0", "in_flight", "2000-01-01T00:00:00.000000Z")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert res.connector["adopted_expired_claim"] is True
    assert "adopted the in-flight claim connector:fake:0 of run other-run, that expired" in res.stderr
    assert cp.claims()["connector:fake:0"]["state"] == "succeeded"


def _claim(cp: ConnectorProject, key: str, state: str, expires: str) -> None:
    from rocky_engine.state.store import StateStore

    with StateStore.open(cp.state_path) as store, store.transaction() as conn:
        conn.execute(
            "INSERT INTO idempotency_keys (key, state, run_id, claimed_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (key, state, "other-run", "2000-01-01T00:00:00.000000Z", expires),
        )


def test_output_dir_that_cannot_be_created_fails_and_frees_the_claim(cp: ConnectorProject) -> None:
    cp.setup("ok")
    (cp.root / "afile").write_text("not a directory")
    cp.config.write_text(cp.config.read_text().replace("file://./landing", "file://./afile/landing"))
    res = cp.load()
    assert res.returncode == 1
    assert res.connector["error"].startswith("cannot create the connector output directory")
    assert cp.claims()["connector:fake:0"]["state"] == "failed"


def _logged_at(stderr: str, start: str) -> datetime:
    """When the first JSON log line whose message starts with ``start`` was written."""
    for line in stderr.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry["message"].startswith(start):
                return datetime.fromisoformat(entry["ts"])
    raise AssertionError(f"no log line starts with {start!r}:\n{stderr}")


def test_files_name_the_target_and_the_time_the_batch_took_to_land(cp: ConnectorProject) -> None:
    cp.setup("ok", "rows=4", "files=2")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    files = res.json["files"]
    assert [f["target"] for f in files] == ["wh.raw.events", "wh.raw.events"]
    # One INSERT reads every file of the batch, so each file took the batch's staging-to-INSERT time: more
    # than nothing, and within the log lines that frame it (the program's run is before them).
    produced = _logged_at(res.stderr, "connector fake: attempt 1 produced 2 file(s)")
    promoted = _logged_at(res.stderr, "connector fake: promoted 8 rows")
    window_ms = (promoted - produced).total_seconds() * 1000
    for f in files:
        assert 0 < f["duration_ms"] <= window_ms + 1, (f, window_ms)
    assert files[0]["duration_ms"] == files[1]["duration_ms"]
    assert res.json["duration_ms"] > window_ms  # the run's own duration also counts the program's run

    cp.setup("mixed")  # staging refuses the batch: the files still name where they were headed
    failed = cp.load()
    assert failed.returncode == 1
    assert [(f["target"], f["rows"]) for f in failed.json["files"]] == [("wh.raw.events", 0)] * 2
    assert all(f["duration_ms"] <= failed.json["duration_ms"] for f in failed.json["files"])
