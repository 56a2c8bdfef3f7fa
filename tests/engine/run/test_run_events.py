"""``rocky.events``: one JSON line on stderr per finished model, table, check, drift action and anomaly,
while the run goes on, under ``--output json``; the same materializations and checks as Dagster Pipes
messages as they happen.

The streaming guarantee is tested on real ``rocky run`` processes with a handshake: model ``b`` reads model
``a``, and a ``before_model_run`` hook of ``b`` blocks on a FIFO the test opens only after it has read
``a``'s event (stderr read incrementally, with a deadline, never a sleep). An engine that wrote its events
at the end would never get past ``b``: the read runs into its deadline and the test fails.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.wire.events import RunEvent
from tests.engine.replication.conftest import ReplicationProject
from tests.engine.run.conftest import WarehouseProject
from tests.engine.wire.strict import assert_strict
from tests.fixtures.inprocess import rocky_in_process

DEADLINE_S = 60.0

HOOK = """
[[hook.on_before_model_run]]
command = "if grep -q '\\"model\\": *\\"b\\"'; then cat {fifo} > /dev/null; fi"
timeout_ms = 120000
"""


def events_of(stderr: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("target") == "rocky.events"]


class StderrReader:
    """stderr of a child read line by line as it arrives, with a deadline (``select``, no sleep)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.fd = proc.stderr.fileno()
        self.buffer = b""
        self.lines: list[str] = []

    def until(self, event: str, name: str | None = None) -> dict[str, Any]:
        """Read until a rocky.events line with this ``event`` (and ``name``) arrives."""
        end = time.monotonic() + DEADLINE_S
        while True:
            while b"\n" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\n", 1)
                line = raw.decode()
                self.lines.append(line)
                doc = json.loads(line) if line.startswith("{") else {}
                if doc.get("target") == "rocky.events" and doc.get("event") == event and (
                    name is None or doc.get("name") == name
                ):
                    return dict(doc)
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            chunk = os.read(self.fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"no {event} event within {DEADLINE_S} s; stderr so far:\n"
                                     + "\n".join(self.lines))
            self.buffer += chunk

    def rest(self, tail: bytes) -> list[str]:
        """Every line read, then the unread buffer and ``tail`` (what communicate returned)."""
        return [*self.lines, *(self.buffer + tail).decode().splitlines()]


@pytest.fixture
def generated(wp: WarehouseProject) -> WarehouseProject:
    """A generated project: a -> b, plus 20 independent models; b waits for the test's go."""
    wp.model("a", "SELECT 1 AS id")
    wp.model("b", "SELECT * FROM a")
    for i in range(20):
        wp.model(f"m{i:02d}", f"SELECT {i} AS id")
    fifo = wp.root / "go.fifo"
    os.mkfifo(fifo)
    wp.config.write_text(wp.config.read_text() + textwrap.dedent(HOOK.format(fifo=fifo)))
    return wp


def test_the_first_event_arrives_while_the_run_goes_on(generated: WarehouseProject) -> None:
    proc = subprocess.Popen(
        [*_rocky(), "-c", str(generated.config), "run", "--output", "json"],
        cwd=generated.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )
    reader = StderrReader(proc)
    try:
        first = reader.until("materialized")
        # b has not run: its hook holds the run until the test says go, so the process is alive
        assert proc.poll() is None
        assert_strict(first, RunEvent)
        assert first["pipeline"] == "models" and first["kind"] == "model"
        with open(generated.root / "go.fifo", "w") as go:
            go.write("go\n")
        stdout, rest = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, rest.decode()[-2000:]
    doc = json.loads(stdout)
    lines = reader.rest(rest)
    events = [json.loads(x) for x in lines if x.startswith("{") and '"rocky.events"' in x]
    assert sorted(e["name"] for e in events) == sorted(["a", "b", *(f"m{i:02d}" for i in range(20))])
    assert {e["run_id"] for e in events} == {doc["run_id"]}
    b = next(e for e in events if e["name"] == "b")
    assert b["asset_key"] == ["wh", "main", "b"] and b["row_count"] == 1 and b["rows_copied"] == 1


def test_event_shapes_for_failures_and_checks(wp: WarehouseProject) -> None:
    wp.config.write_text(wp.config.read_text() + textwrap.dedent("""
        [pipeline.models.checks]
        row_count = true
        null_rate = { columns = ["v"], threshold = 0.1 }
    """))
    wp.model("good", "SELECT 1 AS id, NULL AS v")
    wp.model("grows", "SELECT 2 AS id, 'x' AS v", '[strategy]\ntype = "incremental"\n'
             'timestamp_column = "id"\n')
    wp.model("bad", "SELECT * FROM no_such_table")
    result = rocky_in_process(["-c", str(wp.config), "run", "--output", "json"])
    assert result.returncode == 2, result.stderr
    events = events_of(result.stderr)
    for event in events:
        assert_strict(event, RunEvent)
    by = {(e["event"], e["name"], (e["check"] or {}).get("name")): e for e in events}
    failed = by[("failed", "bad", None)]
    assert failed["asset_key"] == ["wh", "main", "bad"] and "no_such_table" in failed["error"]
    assert failed["rows_copied"] is None and failed["duration_ms"] is not None
    null_rate = by[("check", "good", "null_rate")]["check"]
    assert null_rate == {"name": "null_rate", "kind": "null_rate", "column": "v", "passed": False,
                         "severity": "warning", "detail": None, "observed": 1.0, "expected": 0.1,
                         "details": {"column": "v", "null_rate": 1.0, "threshold": 0.1}}
    assert by[("check", "good", "row_count")]["check"]["observed"] == 1.0
    assert by[("materialized", "grows", None)]["row_count"] == 1  # counted: incremental appends
    # the second incremental run appends nothing: rows written 0, rows in the table still 1
    again = events_of(rocky_in_process(["-c", str(wp.config), "run", "--model", "grows",
                                        "--output", "json"]).stderr)
    grown = next(e for e in again if e["event"] == "materialized")
    assert (grown["rows_copied"], grown["row_count"]) == (0, 1)


def test_table_output_streams_no_event_lines(wp: WarehouseProject) -> None:
    wp.model("a", "SELECT 1 AS id")
    result = rocky_in_process(["-c", str(wp.config), "run", "--output", "table"])
    assert result.returncode == 0
    assert "rocky.events" not in result.stderr and "materialized in" not in result.stderr


def test_replication_tables_stream_drift_and_anomaly(tmp_path: Path) -> None:
    rp = ReplicationProject(tmp_path)
    rp.configure(strategy="full_refresh", sections="""
        [pipeline.raw.checks]
        row_count = true
        anomaly_threshold_pct = 50
    """)
    rp.source_table("src__shop", "orders", rows=100)
    argv = ["-c", str(rp.config), "run", "--pipeline", "raw", "--output", "json"]
    for _ in range(3):  # the anomaly baseline: three runs of 100 rows
        assert rocky_in_process(argv).returncode == 0
    rp.sql("DROP TABLE src__shop.orders")
    rp.source_table("src__shop", "orders", rows=5)
    result = rocky_in_process(argv)
    assert result.returncode == 0, result.stderr
    events = events_of(result.stderr)
    for event in events:
        assert_strict(event, RunEvent)
    assert [e["event"] for e in events] == ["materialized", "check", "anomaly"]
    mat = events[0]
    assert (mat["kind"], mat["name"], mat["asset_key"]) == ("table", "stg__shop.orders",
                                                            ["duckdb", "shop", "orders"])
    assert mat["row_count"] == 5
    anomaly = events[2]["anomaly"]
    assert anomaly["current_count"] == 5 and anomaly["baseline_avg"] == 100.0
    # an incremental copy evolves the target when the source gains a column: a drift event names it
    rp.configure(strategy="incremental")
    rp.sql("ALTER TABLE src__shop.orders ADD COLUMN extra INTEGER")
    events = events_of(rocky_in_process(argv).stderr)
    for event in events:
        assert_strict(event, RunEvent)
    drift = next(e for e in events if e["event"] == "drift")
    assert drift["drift"]["columns"] == ["extra"] and drift["drift"]["action"] == "add_column"
    assert drift["name"] == "stg__shop.orders"


def test_replicated_tables_stream_while_a_slow_table_still_copies(tmp_path: Path) -> None:
    """An incremental copy's watermark is read in a batch after the copy; the table's event waits for that
    read, never for another table: three fast tables' events arrive while a fourth is held (its
    ``before_materialize`` hook blocks on a FIFO the test opens only after reading the three)."""
    rp = ReplicationProject(tmp_path)
    fifo = tmp_path / "go.fifo"
    os.mkfifo(fifo)
    rp.configure(sections=f"""
        [pipeline.raw.execution]
        concurrency = 2

        [[hook.on_before_materialize]]
        command = "if grep -q slow; then cat {fifo} > /dev/null; fi"
        timeout_ms = 120000
    """)
    fast = ["first", "second", "third"]
    for table in fast:
        rp.source_table("src__fast", table, rows=3)
    rp.source_table("src__held", "slow", rows=3)
    proc = subprocess.Popen(
        [*_rocky(), "-c", str(rp.config), "run", "--pipeline", "raw", "--output", "json"],
        cwd=rp.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )
    reader = StderrReader(proc)
    try:
        seen: set[str] = set()
        while len(seen) < len(fast):  # in whichever order the workers finish them
            seen.add(reader.until("materialized")["name"])
        assert proc.poll() is None  # the slow table is still held: these events did not wait for it
        with open(fifo, "w") as go:
            go.write("go\n")
        stdout, rest = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, rest.decode()[-2000:]
    assert seen == {f"stg__fast.{table}" for table in fast}
    doc = json.loads(stdout)
    events = [json.loads(x) for x in reader.rest(rest) if x.startswith("{") and '"rocky.events"' in x]
    # each table once, with the watermark the document has (the event waited for its read)
    marks = {m["metadata"]["target_table_full_name"]: m["metadata"]["watermark"]
             for m in doc["materializations"]}
    assert {e["metadata"]["target_table_full_name"]: e["metadata"]["watermark"] for e in events} == marks
    assert len(events) == 4 and set(marks.values()) == {"2026-01-01T00:00:02Z"}
    for key in marks:  # the watermarks still reached the state store
        assert rp.watermark(key) == "2026-01-01T00:00:02"


def test_pipes_messages_arrive_as_models_finish(generated: WarehouseProject, tmp_path: Path) -> None:
    """Under Dagster Pipes (the real dagster_pipes in the child, a file message channel), a's
    materialization is in the messages file while b's hook still holds the run."""
    from dagster_pipes import encode_param

    messages = tmp_path / "pipes-messages.jsonl"
    context = {
        "asset_keys": ["wh/main/a", "wh/main/b"], "code_version_by_asset_key": None,
        "provenance_by_asset_key": None, "partition_key": None, "partition_key_range": None,
        "partition_time_window": None, "run_id": "dagster-run", "job_name": None, "retry_number": 0,
        "extras": {},
    }
    env = _env() | {"DAGSTER_PIPES_CONTEXT": encode_param({"data": context}),
                    "DAGSTER_PIPES_MESSAGES": encode_param({"path": str(messages)})}
    proc = subprocess.Popen(
        [*_rocky(), "-c", str(generated.config), "run", "--model", "a", "--model", "b", "--output", "json"],
        cwd=generated.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    reader = StderrReader(proc)
    try:
        reader.until("materialized", "a")  # a finished; b is held by its hook
        assert proc.poll() is None
        reported = [json.loads(x) for x in messages.read_text().splitlines()]
        mats = [m["params"]["asset_key"] for m in reported if m["method"] == "report_asset_materialization"]
        assert mats == ["wh/main/a"]
        with open(generated.root / "go.fifo", "w") as go:
            go.write("go\n")
        _, rest = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, rest.decode()[-2000:]
    reported = [json.loads(x) for x in messages.read_text().splitlines()]
    mats = [m["params"]["asset_key"] for m in reported if m["method"] == "report_asset_materialization"]
    assert mats == ["wh/main/a", "wh/main/b"]  # each once: the end of the run sends no duplicate
    assert reported[-1]["method"] == "closed"


def _rocky() -> list[str]:
    from tests.fixtures.projects import ROCKY

    return list(ROCKY)


def _env() -> dict[str, str]:
    from tests.fixtures.projects import child_env

    return child_env()
