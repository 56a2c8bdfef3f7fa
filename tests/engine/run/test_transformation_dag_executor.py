"""The DAG executor: order, containment, stopping, and bounded concurrency over real DuckDB cursors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import duckdb
import pytest

from rocky_engine.adapters.base import WarehouseSession
from rocky_engine.adapters.duckdb.adapter import DuckDbSession
from rocky_engine.run.dag_executor import TaskOutcome, run_dag


@pytest.fixture
def sessions() -> Iterator[list[WarehouseSession]]:
    con = duckdb.connect()
    cursors: list[WarehouseSession] = [DuckDbSession(con.cursor()) for _ in range(4)]
    yield cursors
    for cursor in cursors:
        cursor.close()
    con.close()


def test_single_session_follows_the_given_order(sessions: list[WarehouseSession]) -> None:
    ran: list[str] = []

    def task(name: str, session: WarehouseSession) -> int:
        ran.append(name)
        return int(session.query("SELECT 1")[0][0])

    order = ["a", "b", "c", "d"]
    result = run_dag(order, {"c": ["a"], "d": ["b", "c"]}, task, sessions[:1], stop=threading.Event())
    assert ran == order
    assert all(o.ok and o.value == 1 for o in result.outcomes.values())
    assert result.blocked == {} and result.not_started == []


def test_failure_blocks_descendants_with_failed_roots(sessions: list[WarehouseSession]) -> None:
    def task(name: str, session: WarehouseSession) -> None:
        if name.startswith("bad"):
            session.execute("SELECT CAST('x' AS INTEGER)")

    deps = {
        "child": ["bad1"], "grandchild": ["child", "ok"], "both": ["bad1", "bad2"], "deep": ["both"],
        "ok_child": ["ok"],
    }
    order = ["bad1", "bad2", "ok", "both", "child", "ok_child", "deep", "grandchild"]
    done: list[TaskOutcome[None]] = []
    result = run_dag(order, deps, task, sessions, stop=threading.Event(), on_done=done.append)
    assert {n for n, o in result.outcomes.items() if o.ok} == {"ok", "ok_child"}
    assert {n for n, o in result.outcomes.items() if not o.ok} == {"bad1", "bad2"}
    assert "Conversion Error" in str(result.outcomes["bad1"].error)
    assert result.blocked == {
        "child": ["bad1"], "grandchild": ["bad1"], "both": ["bad1", "bad2"], "deep": ["bad1", "bad2"],
    }
    assert sorted(o.name for o in done) == ["bad1", "bad2", "ok", "ok_child"]
    assert result.not_started == []


def test_a_long_chain_below_a_failure_is_blocked_without_recursion(sessions: list[WarehouseSession]) -> None:
    order = [f"m{i:05d}" for i in range(10_000)]
    deps = {name: [order[i - 1]] for i, name in enumerate(order) if i}

    def task(name: str, session: WarehouseSession) -> None:
        raise RuntimeError("root failed")

    result = run_dag(order, deps, task, sessions[:1], stop=threading.Event())
    assert list(result.outcomes) == ["m00000"]
    assert len(result.blocked) == 9_999
    assert result.blocked["m09999"] == ["m00000"]


def test_edges_to_names_outside_the_run_are_ignored(sessions: list[WarehouseSession]) -> None:
    result = run_dag(["b"], {"b": ["a_not_selected"]}, lambda n, s: n, sessions[:1], stop=threading.Event())
    assert result.outcomes["b"].value == "b"


def test_stop_before_start_runs_nothing(sessions: list[WarehouseSession]) -> None:
    stop = threading.Event()
    stop.set()
    result = run_dag(["a", "b"], {}, lambda n, s: n, sessions, stop=stop)
    assert result.outcomes == {} and result.not_started == ["a", "b"]


@pytest.mark.parametrize("width", [1, 3])
def test_stop_during_the_run_leaves_the_rest_not_started(
    sessions: list[WarehouseSession], width: int
) -> None:
    stop = threading.Event()

    def task(name: str, session: WarehouseSession) -> str:
        if name == "m2":
            stop.set()
        return name

    order = [f"m{i}" for i in range(10)]
    deps = {name: [order[i - 1]] for i, name in enumerate(order) if i}  # a chain: strictly one at a time
    result = run_dag(order, deps, task, sessions[:width], stop=stop)
    assert list(result.outcomes) == ["m0", "m1", "m2"]
    assert result.not_started == order[3:]


def test_concurrency_never_exceeds_the_sessions(sessions: list[WarehouseSession]) -> None:
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    used: set[int] = set()
    # The first three tasks meet before they go on: three sessions must run them at once (a handshake;
    # an executor that ran fewer at a time would break the barrier, not merely be slower).
    together = threading.Barrier(3, timeout=30)

    def task(name: str, session: WarehouseSession) -> None:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            used.add(id(session))
        if name in ("t00", "t01", "t02"):
            together.wait()
        session.query("SELECT 1")
        with lock:
            in_flight -= 1

    order = [f"t{i:02d}" for i in range(16)]
    result = run_dag(order, {}, task, sessions[:3], stop=threading.Event())
    assert len(result.outcomes) == 16
    assert peak == 3
    assert used == {id(s) for s in sessions[:3]}


def test_outcomes_carry_start_time_and_duration(sessions: list[WarehouseSession]) -> None:
    def task(name: str, session: WarehouseSession) -> None:
        time.sleep(0.03)

    result = run_dag(["a"], {}, task, sessions[:1], stop=threading.Event())
    outcome = result.outcomes["a"]
    assert outcome.started_at.tzinfo is not None
    assert 20 <= outcome.duration_ms < 5_000
