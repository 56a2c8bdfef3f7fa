"""SIGINT / SIGTERM during a transformation run, and a warehouse file locked by another process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.engine.run.parking_kit import parking_hook, signal_when_parked

if TYPE_CHECKING:
    from conftest import WarehouseProject

# Seconds of work for DuckDB on this machine; the run is interrupted long before it finishes.
SLOW_SQL = "SELECT count(*) AS n, sum(a.range * b.range) AS s FROM range(3000000) a, range(1000000) b"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _wait_until_running(proc: subprocess.Popen[str], started: Path, models: tuple[str, ...]) -> None:
    """Handshake: each slow model's ``before_model_run`` hook has fired, and then the process has burnt
    CPU on the statements (nothing else in the run does), so they are executing, not about to."""
    deadline = time.monotonic() + 60
    while not (started.exists() and all(f'"{m}"' in started.read_text() for m in models)):
        assert proc.poll() is None and time.monotonic() < deadline, "the slow models never started"
        time.sleep(0.01)
    base = _cpu_seconds(proc.pid)
    while _cpu_seconds(proc.pid) - base < 0.2 * len(models):
        assert proc.poll() is None and time.monotonic() < deadline, "the statements never ran"
        time.sleep(0.01)


def start_and_signal(
    wp: WarehouseProject, sig: signal.Signals, *args: str, slow: tuple[str, ...] = ("slow",)
) -> tuple[int, dict[str, Any], str]:
    """Start ``rocky run``, wait until the ``slow`` models' statements run, send ``sig``; return (exit,
    JSON, stderr)."""
    started = wp.root / "started.jsonl"
    hook = f"\n[[hook.on_before_model_run]]\ncommand = 'cat >> {started}'\n"
    wp.config.write_text(wp.config.read_text() + hook)
    proc = wp.popen("run", "--output", "json", *args)
    assert proc.stderr is not None
    try:
        _wait_until_running(proc, started, slow)
        proc.send_signal(sig)
        stdout, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, json.loads(stdout), rest


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_signal_interrupts_the_statement_and_records_the_run(
    wp: WarehouseProject, sig: signal.Signals
) -> None:
    wp.model("slow", SLOW_SQL)
    t0 = time.monotonic()
    code, doc, stderr = start_and_signal(wp, sig)
    assert time.monotonic() - t0 < 20  # the statement was cancelled, not waited out
    assert code == 130
    assert doc["interrupted"] is True
    assert doc["status"] == "Failure"
    assert doc["materializations"] == []
    [error] = doc["errors"]
    assert error["asset_key"] == ["wh", "main", "slow"]
    assert error["error"].startswith("interrupted: ")
    assert "Traceback" not in stderr
    assert f"interrupted by {sig.name}" in stderr
    [record] = wp.runs()
    assert record.run_id == doc["run_id"]
    assert record.interrupted is True
    assert record.exit_code == 130
    assert record.status == "Failure"
    assert wp.relation_kind("main", "slow") is None


@pytest.mark.slow
def test_interrupt_keeps_finished_models_and_stops_scheduling(wp: WarehouseProject) -> None:
    wp.model("fast", "SELECT 1 AS x")
    wp.model("slow", SLOW_SQL)
    wp.model("slow_child", "SELECT * FROM slow")
    wp.model("zzz_later", "SELECT 2 AS x")
    code, doc, stderr = start_and_signal(wp, signal.SIGTERM, "--parallel", "1")
    assert code == 130
    assert doc["interrupted"] is True
    assert doc["status"] == "PartialFailure"
    assert [m["asset_key"][-1] for m in doc["materializations"]] == ["fast"]
    # the model never started is named too, as a replication run names its tables not run
    slow, later = doc["errors"]
    assert slow["asset_key"][-1] == "slow" and slow["error"].startswith("interrupted: ")
    assert later == {"asset_key": ["wh", "main", "zzz_later"], "error": "not run: the run was interrupted",
                     "failure_kind": "unknown"}
    assert (doc["tables_failed"], doc["execution"]["tables_processed"]) == (1, 2)  # not run is not failed
    assert [c["model"] for c in doc["contained"]] == ["slow_child"]
    assert wp.relation_kind("main", "zzz_later") is None  # never started after the signal
    assert "Traceback" not in stderr
    [record] = wp.runs()
    assert record.interrupted is True
    # the record names every model the run left unbuilt, with why
    assert [(e.model_name, e.status) for e in record.models_executed] == [
        ("fast", "success"), ("slow", "failed"), ("slow_child", "contained"), ("zzz_later", "interrupted")
    ]


@pytest.mark.slow
def test_interrupt_with_several_statements_in_flight(wp: WarehouseProject) -> None:
    wp.model("slow_a", SLOW_SQL)
    wp.model("slow_b", SLOW_SQL)
    t0 = time.monotonic()
    code, doc, stderr = start_and_signal(wp, signal.SIGINT, "--parallel", "2", slow=("slow_a", "slow_b"))
    assert time.monotonic() - t0 < 20
    assert code == 130
    assert doc["interrupted"] is True
    assert sorted(e["asset_key"][-1] for e in doc["errors"]) == ["slow_a", "slow_b"]
    assert "Traceback" not in stderr
    assert wp.runs()[0].interrupted is True


HOLDER = textwrap.dedent(
    """
    import sys
    import duckdb
    con = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
    con.close()
    """
)


def test_locked_warehouse_file_is_a_recorded_failure_naming_the_file(wp: WarehouseProject) -> None:
    """A warehouse that cannot be opened is a Failure run: exit 1, the JSON and one error line say which
    file and what to do, and the run record keeps the attempt for `rocky history` and the scheduler."""
    wp.model("a", "SELECT 1 AS x")
    wp.sql("CREATE TABLE keep AS SELECT 1 AS x")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(wp.warehouse)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        res = wp.cli("run", "--output", "table")
        res_json = wp.cli("run", "--output", "json")
    finally:
        holder.communicate(timeout=30)
    expected = (
        rf"DuckDB file {re.escape(str(wp.warehouse))} of adapter 'default' is locked by another "
        rf"process \(PID {holder.pid}\); wait for that process to finish or stop it, then run again"
    )
    assert res.returncode == 1
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert re.search(expected, errors[0]), errors[0]
    assert "Traceback" not in res.stderr
    assert res_json.returncode == 1
    doc = json.loads(res_json.stdout)
    assert doc["status"] == "Failure"
    assert doc["tables_copied"] == 0
    assert doc["errors"][0]["failure_kind"] == "connection-failed"
    assert re.fullmatch(expected, doc["errors"][0]["error"])
    runs = wp.runs()
    assert [r.status for r in runs] == ["Failure", "Failure"]
    # once the holder is gone, the same run works
    assert wp.cli("run", "--output", "json").returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_during_a_models_hook_sends_nothing_of_that_model(
    wp: WarehouseProject, sig: signal.Signals
) -> None:
    wp.model("a_first", "SELECT 1 AS x")
    wp.model("b_parked", "SELECT 2 AS x")
    wp.model("c_after", "SELECT 3 AS x")
    hook, ready = parking_hook(wp.root, "before_model_run", "b_parked")
    wp.config.write_text(wp.config.read_text() + hook)
    proc = wp.popen("run", "--output", "json", "--parallel", "1")
    stdout, stderr = signal_when_parked(proc, ready, sig, "b_parked")
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert (doc["status"], doc["interrupted"]) == ("PartialFailure", True)
    assert [m["asset_key"][-1] for m in doc["materializations"]] == ["a_first"]
    # the model whose hook the signal stopped is not built after the signal: it was not started
    assert wp.relation_kind("main", "b_parked") is None
    assert doc["errors"] == [
        {"asset_key": ["wh", "main", n], "error": "not run: the run was interrupted",
         "failure_kind": "unknown"}
        for n in ("b_parked", "c_after")
    ]
    assert (doc["tables_failed"], doc["execution"]["tables_processed"]) == (0, 1)
    assert "the run goes on" not in stderr and "Traceback" not in stderr
    [record] = wp.runs()
    assert (record.status, record.exit_code, record.interrupted) == ("PartialFailure", 130, True)
    assert [(e.model_name, e.status) for e in record.models_executed] == [
        ("a_first", "success"), ("b_parked", "interrupted"), ("c_after", "interrupted")
    ]
