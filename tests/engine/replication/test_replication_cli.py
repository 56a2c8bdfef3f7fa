"""``rocky run`` of a replication pipeline through the real CLI: --filter, exit codes, JSON document."""

from __future__ import annotations

import json

import pytest

from tests.engine.replication.conftest import ReplicationProject


@pytest.fixture
def two_sources(rp: ReplicationProject) -> ReplicationProject:
    rp.source_table("src__orders", "orders", rows=4)
    rp.source_table("src__orders", "customers", rows=2)
    rp.source_table("src__payments", "payments", rows=3)
    return rp


def test_filter_without_equals(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "--filter", "orders")
    assert result.returncode == 1
    assert result.stdout == ""
    assert ("error: --filter 'orders' must be key=value (id=, table=, or a component: source=); e.g. "
            "--filter id=raw__orders or --filter table=orders") in result.stderr
    assert "Traceback" not in result.stderr


def test_filter_unknown_key(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "--filter", "tenant=acme")
    assert result.returncode == 1
    assert ("error: --filter key 'tenant' is not id, table or a schema_pattern component; valid keys: id=, "
            "table=, or a component: source=") in result.stderr


def test_filter_matching_nothing_is_success(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "--filter", "source=nope", "--output", "json")
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["status"] == "Success" and doc["tables_copied"] == 0 and doc["filter"] == "source=nope"
    assert doc["materializations"] == []
    messages = [json.loads(line)["message"] for line in result.stderr.splitlines() if line.startswith("{")]
    assert "filter source=nope matched no table; nothing to do" in messages


@pytest.mark.parametrize(
    ("flt", "tables"),
    [("id=src__orders", ["customers", "orders"]), ("table=payments", ["payments"]),
     ("source=orders", ["customers", "orders"])],
)
def test_filter_selects(two_sources: ReplicationProject, flt: str, tables: list[str]) -> None:
    out = two_sources.run(filter=flt)
    assert sorted(m.asset_key[-1] for m in out.materializations) == tables
    assert out.filter == flt


def test_json_document_shape(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "-o", "json")
    doc = result.json
    for key in ("version", "command", "status", "filter", "duration_ms", "tables_copied", "tables_failed",
                "materializations", "check_results", "execution", "metrics", "permissions", "drift",
                "interrupted", "pipeline_type", "run_id"):
        assert key in doc, key
    assert doc["command"] == "run" and doc["pipeline_type"] == "replication" and doc["filter"] == ""
    assert doc["metrics"] is None and doc["check_results"] == []
    assert doc["execution"]["tables_processed"] == 3
    assert doc["drift"] == {"tables_checked": 0, "tables_drifted": 0, "actions_taken": []}
    for absent in ("errors", "tables_skipped", "resumed_from", "idempotency_key", "skipped_by_run_id"):
        assert absent not in doc


def test_partial_failure_exits_2_with_the_json_first(two_sources: ReplicationProject) -> None:
    two_sources.sql("CREATE SCHEMA src__bad", "CREATE TABLE src__bad.nots AS SELECT 1 AS id")
    result = two_sources.cli("run", "--pipeline", "raw", "-o", "json")
    assert result.returncode == 2
    doc = result.json
    assert doc["status"] == "PartialFailure"
    assert doc["errors"] == [{
        "asset_key": ["duckdb", "bad", "nots"],
        "error": "timestamp column 'ts' is not a column of source table src__bad.nots; set "
                 "timestamp_column to the table's change timestamp, or use strategy = \"full_refresh\"",
        "failure_kind": "query-rejected",
    }]


def test_model_flag_is_rejected(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "--model", "orders")
    assert result.returncode == 1
    assert "error: --model applies to transformation pipelines; use --filter table=<name>" in result.stderr


def test_table_output(two_sources: ReplicationProject) -> None:
    result = two_sources.cli("run", "--pipeline", "raw", "--output", "table")
    assert result.returncode == 0
    assert "status=Success" in result.stdout and "duckdb.payments.payments" in result.stdout
