"""Staging and promote: schema drift, the contract, and leftover staging relations of crashed runs."""

from __future__ import annotations

import duckdb
import pytest

from rocky_engine.adapters.base import Column
from rocky_engine.adapters.duckdb.dialect import DIALECT as DUCKDB
from rocky_engine.connectors.promote import DriftError, plan_drift
from tests.engine.connectors.kit import ConnectorProject


def cols(*pairs: str) -> list[Column]:
    return [Column(p.split(":")[0], p.split(":")[1]) for p in pairs]


def test_drift_plan_rules() -> None:
    plan = plan_drift(cols("id:BIGINT", "amount:DOUBLE", "note:VARCHAR"), cols("ID:INTEGER", "amount:FLOAT"),
                      DUCKDB)
    assert plan.add_columns == [("note", "VARCHAR")]
    assert plan.alter_columns == [("ID", "BIGINT"), ("amount", "DOUBLE")]
    assert plan.steps == ["ADD COLUMN note VARCHAR", "ALTER COLUMN ID TYPE BIGINT",
                          "ALTER COLUMN amount TYPE DOUBLE"]
    # a batch narrower than the target needs nothing: the INSERT casts
    assert plan_drift(cols("id:INTEGER"), cols("id:BIGINT"), DUCKDB).steps == []
    assert plan_drift(cols("id:INT8"), cols("id:BIGINT"), DUCKDB).steps == []
    with pytest.raises(DriftError, match="column 'id' is BIGINT in the target and VARCHAR in the batch"):
        plan_drift(cols("id:VARCHAR"), cols("id:BIGINT"), DUCKDB)


def test_drift_add_column_and_widening_through_a_run(cp: ConnectorProject) -> None:
    cp.setup("schema", "cols=id:int")
    assert cp.load().returncode == 0
    cp.setup("schema", "cols=id:big,extra:str")
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert "ADD COLUMN extra VARCHAR" in res.stderr and "ALTER COLUMN id TYPE BIGINT" in res.stderr
    rows = cp.rows("SELECT column_name, data_type FROM information_schema.columns "
                   "WHERE table_name = 'events' ORDER BY ordinal_position")
    assert rows == [("id", "BIGINT"), ("extra", "VARCHAR")]
    assert cp.rows("SELECT count(*), count(extra) FROM wh.raw.events") == [(4, 2)]


def test_unsafe_type_change_fails_before_the_promote(cp: ConnectorProject) -> None:
    cp.setup("schema", "cols=id:big,name:str")
    assert cp.load().returncode == 0
    cp.setup("schema", "cols=id:str,name:str")
    res = cp.load()
    assert res.returncode == 1
    assert "schema drift that is not a safe widening: column 'id' is BIGINT in the target and VARCHAR in " \
           "the batch" in res.connector["error"]
    error = res.connector["error"]
    assert "the target's rows and the saved state are unchanged, the claim was freed" in error
    assert cp.count() == 2 and cp.relations() == ["events"]
    state = cp.state()
    assert state is not None and state["commit_seq"] == 1
    assert cp.claims()["connector:fake:1"]["state"] == "failed"
    assert res.json["files"][0]["error"].startswith("staging the batch failed: schema drift")


CONTRACT = 'contract = {{ columns = [{cols}]{extra} }}\n'


@pytest.mark.parametrize(
    ("mode_cols", "contract", "message"),
    [
        ("id:big,name:str", '{ name = "id", type = "BIGINT", nullable = false }, { name = "NAME" }', None),
        ("id:big", '{ name = "name" }', "column 'name' is missing from the batch"),
        ("id:big", '{ name = "id", type = "VARCHAR" }', "column 'id' is BIGINT, the contract says VARCHAR"),
        ("id:null", '{ name = "id", nullable = false }', "column 'id' has 2 NULL value(s) but is nullable"),
    ],
)
def test_contract(cp: ConnectorProject, mode_cols: str, contract: str, message: str | None) -> None:
    cp.setup("schema", f"cols={mode_cols}", extra=CONTRACT.format(cols=contract, extra=""))
    res = cp.load()
    if message is None:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 1
    assert f"the batch breaks the connector's contract: {message}" in res.connector["error"]
    assert cp.relations() == []  # the target was never created, the staging view dropped
    assert cp.state() is None


def test_contract_min_rows(cp: ConnectorProject) -> None:
    cp.setup("schema", "cols=id:big", "rows=2", extra=CONTRACT.format(cols="", extra=", min_rows = 3"))
    res = cp.load()
    assert res.returncode == 1
    assert "the batch has 2 rows, the contract wants at least 3" in res.connector["error"]


def test_leftover_staging_of_crashed_runs_is_dropped_but_not_live_ones(cp: ConnectorProject) -> None:
    cp.setup("ok")
    assert cp.load().returncode == 0
    dead, live = "a" * 32, "b" * 32
    con = duckdb.connect(str(cp.root / "wh.duckdb"))
    con.execute(f"CREATE TABLE raw.events__rocky_stg_{dead} AS SELECT 1 AS id")
    con.execute(f"CREATE VIEW raw.events__rocky_stg_{live} AS SELECT 1 AS id")
    con.execute("CREATE TABLE raw.events__rocky_stg_not_a_run_id AS SELECT 1 AS id")
    con.close()
    from rocky_engine.state.store import StateStore

    with StateStore.open(cp.state_path) as store, store.transaction() as conn:
        conn.execute(
            "INSERT INTO idempotency_keys (key, state, run_id, claimed_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ("connector:other:0", "in_flight", live, "2000-01-01T00:00:00.000000Z",
             "2999-01-01T00:00:00.000000Z"),
        )
    res = cp.load()
    assert res.returncode == 0, res.stderr
    assert f"left behind by crashed run {dead}" in res.stderr
    assert cp.relations() == ["events", f"events__rocky_stg_{live}", "events__rocky_stg_not_a_run_id"]


def test_failed_promote_leaves_the_claim_in_flight(cp: ConnectorProject) -> None:
    cp.setup("schema", "cols=id:null")
    con = duckdb.connect(str(cp.root / "wh.duckdb"))
    con.execute("CREATE SCHEMA raw")
    con.execute("CREATE TABLE raw.events (id BIGINT NOT NULL)")
    con.close()
    res = cp.load()
    assert res.returncode == 1
    error = res.connector["error"]
    assert error.startswith("the promote failed: ")
    assert "NOT NULL" in error
    assert "the claim connector:fake:0 stays in flight until it expires" in error
    assert res.json["files_failed"] == 1 and res.json["files"][0]["rows"] == 0
    assert cp.claims()["connector:fake:0"]["state"] == "in_flight"
    assert cp.relations() == ["events"]  # staging dropped
    assert len(cp.scratch_dirs()) == 1
    assert cp.state() is None
