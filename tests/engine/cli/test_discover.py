"""``rocky discover`` through the real CLI: JSON shape, components, exclusions, misfits, table output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.replication.conftest import ReplicationProject


@pytest.fixture
def project(tmp_path: Path) -> ReplicationProject:
    rp = ReplicationProject(tmp_path)
    rp.configure(components='["tenant", "regions..."]', schema_template="stg__{tenant}__{regions}",
                 extra='excluded_tables = ["audit_*"]')
    rp.source_table("src__acme__us__west", "orders", rows=7)
    rp.source_table("src__acme__us__west", "audit_log", rows=1)
    rp.source_table("src__globex__eu", "orders", rows=3)
    rp.source_table("src__globex__eu", "customers", rows=2)
    rp.source_table("src__broken", "x", rows=1)
    rp.source_table("other", "ignored", rows=1)
    return rp


def test_discover_json(project: ReplicationProject) -> None:
    result = project.cli("discover", "--output", "json")
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["version"] and doc["command"] == "discover"
    assert doc["sources"] == [
        {
            "id": "src__acme__us__west",
            "components": {"tenant": "acme", "regions": ["us", "west"]},
            "source_type": "duckdb",
            # the newest `ts` (the pipeline's timestamp_column) of the source's tables: rows 0..6
            "last_sync_at": "2026-01-01T00:00:06Z",
            "tables": [{"name": "orders", "row_count": 7}],
            "metadata": {"pipeline": "raw"},
        },
        {
            "id": "src__globex__eu",
            "components": {"tenant": "globex", "regions": ["eu"]},
            "source_type": "duckdb",
            "last_sync_at": "2026-01-01T00:00:02Z",  # the max over both tables
            "tables": [{"name": "customers", "row_count": 2}, {"name": "orders", "row_count": 3}],
            "metadata": {"pipeline": "raw"},
        },
    ]
    assert doc["excluded_tables"] == [
        {"asset_key": ["duckdb", "acme", "us__west", "audit_log"], "source_schema": "src__acme__us__west",
         "table_name": "audit_log", "reason": "excluded_tables pattern 'audit_*'"}
    ]
    assert "failed_sources" not in doc and "checks" not in doc
    assert ("schema 'src__broken' does not match the pattern src__<tenant>__<regions>... (expected at "
            "least 2 components after 'src__', found 1); skipped") in result.stderr


def test_discover_reports_freshness_checks(project: ReplicationProject) -> None:
    project.configure(sections="""
        [pipeline.raw.checks]
        freshness = { threshold_seconds = 3600 }
    """)
    doc = project.cli("discover", "-o", "json").json
    assert doc["checks"] == {"freshness": {"threshold_seconds": 3600}}


def test_discover_table_output(project: ReplicationProject) -> None:
    result = project.cli("discover", "--output", "table")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["source", "type", "components", "tables", "rows", "last", "sync"]
    assert "src__acme__us__west" in lines[2] and "tenant=acme, regions=us/west" in lines[2]
    assert "excluded: src__acme__us__west.audit_log" in result.stdout


def test_discover_does_not_write_the_warehouse_or_state(project: ReplicationProject) -> None:
    project.cli("discover", "-o", "json")
    assert not project.state_path.exists()
    created = "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'stg%'"
    assert project.query(created) == [(0,)]


def test_discover_one_pipeline_and_errors(project: ReplicationProject) -> None:
    text = project.config.read_text() + '\n[pipeline.models]\ntype = "transformation"\nmodels = "models/**"\n'
    project.config.write_text(text)
    (project.root / "models").mkdir()
    assert len(project.cli("discover", "--pipeline", "raw", "-o", "json").json["sources"]) == 2
    wrong = project.cli("discover", "--pipeline", "models")
    assert wrong.returncode == 1
    assert ("error: pipeline 'models' is a transformation pipeline; discover lists replication sources; "
            "name a replication pipeline, or omit --pipeline to discover them all") in wrong.stderr
    unknown = project.cli("discover", "--pipeline", "nope")
    assert unknown.returncode == 1 and "unknown pipeline 'nope'" in unknown.stderr


def test_discover_without_replication_pipelines(tmp_path: Path) -> None:
    rp = ReplicationProject(tmp_path)
    rp.write_config('[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n')
    result = rp.cli("discover", "-o", "json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["sources"] == []
