"""Pausing concurrent work for warehouse maintenance: the DuckDB WAL checkpoint and the two schedulers
(the transformation DAG executor and the replication table pool) that make room for it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.duckdb import checkpoint
from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter, DuckDbSession
from rocky_engine.adapters.duckdb.checkpoint import WalCheckpoint
from rocky_engine.errors import AdapterError
from rocky_engine.run.concurrency import ConcurrencyLimit, StopRules, run_tables
from rocky_engine.run.dag_executor import run_dag
from tests.engine.run.conftest import WarehouseProject


class Recorder:
    """A maintenance that is due every ``every`` finished tasks and records what ran at that moment."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.lock = threading.Lock()
        self.active = 0
        self.finished = 0
        self.runs: list[int] = []  # tasks in flight when run() was called (must be 0)
        self.last_run_at = 0

    def due(self) -> bool:
        with self.lock:
            return self.finished - self.last_run_at >= self.every

    def run(self) -> None:
        with self.lock:
            self.runs.append(self.active)
            self.last_run_at = self.finished

    def task(self, name: str, _: object) -> str:
        with self.lock:
            self.active += 1
        time.sleep(0.005)
        with self.lock:
            self.active -= 1
            self.finished += 1
        return name


@pytest.mark.parametrize("width", [1, 3])
def test_dag_executor_runs_maintenance_with_every_session_idle(width: int) -> None:
    recorder = Recorder(every=4)
    order = [f"m{i:02d}" for i in range(20)]
    deps = {f"m{i:02d}": [f"m{i - 5:02d}"] for i in range(5, 20)}
    sessions: list[WarehouseSession] = [object() for _ in range(width)]  # type: ignore[misc]
    result = run_dag(order, deps, recorder.task, sessions, stop=threading.Event(), maintenance=recorder)
    assert sorted(result.outcomes) == order and all(o.ok for o in result.outcomes.values())
    assert len(recorder.runs) >= 3
    assert recorder.runs == [0] * len(recorder.runs)


@pytest.mark.parametrize("width", [1, 3])
def test_table_pool_runs_maintenance_with_every_worker_idle(width: int) -> None:
    recorder = Recorder(every=4)
    names = [f"t{i:02d}" for i in range(20)]
    run, _ = run_tables(names, recorder.task, lambda: 0, ConcurrencyLimit(width, tables=20), StopRules(),
                        stop=threading.Event(), maintenance=recorder)
    assert sorted(run.outcomes) == names and run.not_run == []
    assert len(recorder.runs) >= 3
    assert recorder.runs == [0] * len(recorder.runs)


class DueOnce(Recorder):
    """Due only when first asked: before anything has run."""

    def __init__(self) -> None:
        super().__init__(every=0)
        self.asked = 0

    def due(self) -> bool:
        self.asked += 1
        return self.asked == 1


def test_maintenance_due_before_the_first_task_still_lets_the_run_start() -> None:
    pool = DueOnce()
    run, _ = run_tables(["a", "b"], pool.task, lambda: 0, ConcurrencyLimit(2, tables=2), StopRules(),
                        stop=threading.Event(), maintenance=pool)
    assert sorted(run.outcomes) == ["a", "b"] and pool.runs == [0]
    dag = DueOnce()
    sessions: list[WarehouseSession] = [object(), object()]  # type: ignore[list-item]
    result = run_dag(["a", "b"], {}, dag.task, sessions, stop=threading.Event(), maintenance=dag)
    assert sorted(result.outcomes) == ["a", "b"] and dag.runs == [0]


def _write(adapter: DuckDbAdapter, rows: int) -> None:
    adapter.execute(
        f"CREATE OR REPLACE TABLE t AS SELECT range AS id, md5(range::VARCHAR) AS h FROM range({rows})"
    )


def test_wal_checkpoint_empties_the_wal_once_it_passes_the_threshold(tmp_path: Path) -> None:
    adapter = DuckDbAdapter("wh", tmp_path / "wh.duckdb")
    try:
        adapter.execute("SET wal_autocheckpoint = '10GB'")  # only our checkpoint may empty the WAL
        checkpoint = WalCheckpoint(adapter, tmp_path / "wh.duckdb.wal", threshold=64 * 1024)
        assert not checkpoint.due()
        _write(adapter, 50_000)
        assert checkpoint.due()
        checkpoint.run()
        assert not checkpoint.due()
        wal = tmp_path / "wh.duckdb.wal"
        assert not wal.exists() or wal.stat().st_size < 64 * 1024
        assert adapter.query("SELECT count(*) FROM t") == [(50_000,)]
    finally:
        adapter.close()


def test_a_checkpoint_that_fails_is_skipped_and_not_retried_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = DuckDbAdapter("wh", tmp_path / "wh.duckdb")
    try:
        adapter.execute("SET wal_autocheckpoint = '10GB'")
        checkpoint = WalCheckpoint(adapter, tmp_path / "wh.duckdb.wal", threshold=64 * 1024)
        _write(adapter, 50_000)
        real_execute = DuckDbSession.execute

        def refusing(self: DuckDbSession, sql: str, params: object = None) -> int | None:
            if sql == "CHECKPOINT":
                raise AdapterError("Cannot CHECKPOINT: there are other write transactions active")
            return real_execute(self, sql, params)  # type: ignore[arg-type]

        monkeypatch.setattr(DuckDbSession, "execute", refusing)
        checkpoint.run()  # no exception: the run goes on
        assert (tmp_path / "wh.duckdb.wal").stat().st_size >= 64 * 1024
        assert not checkpoint.due()  # not due again until as much more is written
        monkeypatch.setattr(DuckDbSession, "execute", real_execute)
        _write(adapter, 50_000)
        assert checkpoint.due()
    finally:
        adapter.close()


def test_read_only_and_in_memory_warehouses_need_no_checkpoint(tmp_path: Path) -> None:
    DuckDbAdapter("wh", tmp_path / "wh.duckdb").close()
    read_only = DuckDbAdapter("wh", tmp_path / "wh.duckdb", read_only=True)
    memory = DuckDbAdapter("mem", None)
    try:
        assert read_only.maintenance() is None and memory.maintenance() is None
    finally:
        read_only.close()
        memory.close()


def test_a_transformation_run_checkpoints_between_models(
    wp: WarehouseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "WAL_CHECKPOINT_BYTES", 1)
    ran: list[int] = []
    real_run = WalCheckpoint.run

    def counting_run(self: WalCheckpoint) -> None:
        ran.append(1)
        real_run(self)

    monkeypatch.setattr(WalCheckpoint, "run", counting_run)
    for i in range(8):
        wp.model(f"m{i}", f"SELECT range AS id, {i} AS k FROM range(1000)")
    wp.model("total", " UNION ALL ".join(f"SELECT * FROM m{i}" for i in range(8)))
    out = wp.run(parallel=3)
    assert out.status == "Success" and out.tables_copied == 9
    assert ran  # the run paused for the checkpoint at least once and still built every model
    assert wp.query("SELECT count(*) FROM total") == [(8000,)]
