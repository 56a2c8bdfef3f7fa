"""``rocky dag`` in process: every field of the document, replicated tables from the config and from the
discovery cache, checks that are configured (and only those), the published ``rocky-sdk`` model, errors.

No warehouse is touched: the DuckDB file does not exist while ``rocky dag`` runs (and is not created).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.wire.dag import DagResult
from tests.engine.wire.strict import assert_strict
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import DuckDBProject

CONFIG = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
type = "replication"
timestamp_column = "_synced"

[pipeline.raw.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["tenant", "regions..."]

[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}__{regions}"

[pipeline.raw.checks]
row_count = true
freshness = { threshold_seconds = 3600 }

[pipeline.models]
type = "transformation"
models = "models/**"

[pipeline.models.checks]
null_rate = { columns = ["id"], threshold = 0.1 }

[[pipeline.models.checks.assertions]]
table = "orders_clean"
type = "not_null"
column = "id"

[pipeline.quality]
type = "quality"

[[pipeline.quality.tables]]
catalog = "wh"
schema = "marts"

[[pipeline.quality.checks.assertions]]
table = "marts.order_totals"
type = "unique"
column = "customer"
"""

MODELS: dict[str, str] = {
    "staging/orders_clean.sql": "-- Orders without test rows.\n-- One row per order.\n"
    "SELECT id, customer, amount FROM stg__acme__us__west.orders WHERE id > 0",
    "staging/orders_clean.toml": '[strategy]\ntype = "incremental"\ntimestamp_column = "id"\n'
    '[freshness]\nmax_lag_seconds = 3600\n',
    "staging/_defaults.toml": '[target]\nschema = "staging"\n',
    "marts/order_totals.sql": "/* Revenue per customer. */\n"
    "SELECT customer, SUM(amount) AS total FROM orders_clean JOIN wh.stg__acme__us__west.customers c "
    "USING (customer) GROUP BY 1",
    "marts/order_totals.toml": 'description = "Revenue per customer, all time."\n'
    'owners = ["team:finance", "ana@example.com"]\ntags = { layer = "mart", pii = false }\n'
    '[strategy]\ntype = "merge"\nunique_key = "customer"\n',
    "marts/_defaults.toml": '[target]\nschema = "marts"\n',
    "marts/recent.sql": "SELECT * FROM order_totals, other_schema.not_replicated",
    "marts/recent.toml": '[strategy]\ntype = "view"\n',
}


@pytest.fixture
def project(tmp_path: Path) -> DuckDBProject:
    p = DuckDBProject(tmp_path)
    p.write_config(CONFIG)
    for rel, text in MODELS.items():
        path = tmp_path / "models" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return p


def dag(project: DuckDBProject, *args: str) -> tuple[int, dict[str, Any], str]:
    result = rocky_in_process(["-c", str(project.config), "dag", "-o", "json", *args])
    doc = json.loads(result.stdout) if result.returncode == 0 else {}
    return result.returncode, doc, result.stderr


def nodes(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in doc["nodes"]}


def test_dag_document_from_files_alone(project: DuckDBProject) -> None:
    code, doc, stderr = dag(project)
    assert code == 0, stderr
    assert not project.warehouse.exists()  # no warehouse connection: the file was never opened
    assert_strict(doc, DagResult)
    by_id = nodes(doc)
    replicated = "replication:raw/duckdb/acme/us__west/orders"
    assert set(by_id) == {
        replicated, "replication:raw/duckdb/acme/us__west/customers",
        "transformation:orders_clean", "transformation:order_totals", "transformation:recent",
    }
    assert by_id[replicated] == {
        "id": replicated, "kind": "replication", "label": "orders", "pipeline": "raw", "depends_on": [],
        "target": {"catalog": "wh", "schema": "stg__acme__us__west", "table": "orders"},
        "warehouse": "duckdb", "asset_key": ["duckdb", "acme", "us__west", "orders"],
        "checks": [
            {"name": "row_count", "kind": "row_count", "severity": "error"},
            {"name": "row_count_anomaly", "kind": "anomaly", "severity": "warning"},
            {"name": "freshness", "kind": "freshness", "severity": "warning"},
        ],
        "source": {"schema": "src__acme__us__west", "table": "orders", "source_type": "duckdb",
                   "components": {"tenant": "acme", "regions": ["us", "west"]}},
    }
    clean = by_id["transformation:orders_clean"]
    assert clean["depends_on"] == [replicated]
    assert clean["upstream_tables"] == [["duckdb", "acme", "us__west", "orders"]]
    assert "upstream_models" not in clean
    assert clean["strategy"] == {"type": "incremental", "timestamp_column": "id"}
    assert clean["target"] == {"catalog": "wh", "schema": "staging", "table": "orders_clean"}
    assert clean["asset_key"] == ["wh", "staging", "orders_clean"]
    assert clean["freshness"] == {"max_lag_seconds": 3600}
    assert clean["description"] == "Orders without test rows. One row per order."  # the leading comment
    assert clean["sql_path"] == "models/staging/orders_clean.sql"
    assert len(clean["sql_hash"]) == 16
    assert clean["assertions"] == [{"name": "not_null_id", "kind": "not_null", "column": "id",
                                    "severity": "error"}]
    assert clean["checks"] == [{"name": "null_rate", "kind": "null_rate", "column": "id",
                                "severity": "warning"}]
    totals = by_id["transformation:order_totals"]
    assert totals["depends_on"] == ["replication:raw/duckdb/acme/us__west/customers",
                                    "transformation:orders_clean"]
    assert totals["upstream_models"] == ["orders_clean"]
    assert totals["strategy"] == {"type": "merge", "unique_key": ["customer"]}
    assert totals["description"] == "Revenue per customer, all time."  # the sidecar wins over the comment
    assert totals["owners"] == ["team:finance", "ana@example.com"]
    assert totals["tags"] == {"layer": "mart", "pii": "false"}
    # the quality pipeline's assertion on the mart, named with the pipeline that evaluates it
    assert totals["assertions"] == [{"name": "unique_customer", "kind": "unique", "column": "customer",
                                     "severity": "error", "pipeline": "quality"}]
    recent = by_id["transformation:recent"]
    # a view builds no table, so the pipeline's checks never run on it: none are declared
    assert recent["checks"] == [] and "assertions" not in recent
    assert recent["depends_on"] == ["transformation:order_totals"]  # other_schema is no pipeline's
    assert "description" not in recent
    assert doc["edges"] == [
        {"from": replicated, "to": "transformation:orders_clean", "edge_type": "data"},
        {"from": "replication:raw/duckdb/acme/us__west/customers", "to": "transformation:order_totals",
         "edge_type": "data"},
        {"from": "transformation:orders_clean", "to": "transformation:order_totals", "edge_type": "data"},
        {"from": "transformation:order_totals", "to": "transformation:recent", "edge_type": "data"},
    ]
    assert doc["execution_layers"] == [
        ["replication:raw/duckdb/acme/us__west/customers", replicated],
        ["transformation:orders_clean"], ["transformation:order_totals"], ["transformation:recent"],
    ]
    assert doc["summary"] == {"total_nodes": 5, "total_edges": 4, "execution_layers": 4,
                              "counts_by_kind": {"replication": 2, "transformation": 3}}


def test_dag_validates_against_the_published_sdk_model(project: DuckDBProject) -> None:
    from rocky_sdk.types_generated.dag_schema import DagOutput  # rocky-sdk==0.29.0 is in [dev]

    code, doc, stderr = dag(project)
    assert code == 0, stderr
    published = DagOutput.model_validate(doc)
    assert published.command == "dag" and published.schema_version == "1"
    by_id = {n.id: n for n in published.nodes}
    assert type(by_id["transformation:order_totals"].strategy).__name__ == "StrategyConfig15"  # merge
    assert by_id["transformation:order_totals"].target.schema_ == "marts"  # type: ignore[union-attr]
    assert published.summary.total_edges == len(published.edges) == 4


def test_dag_lists_every_discovered_table_from_the_cache(project: DuckDBProject) -> None:
    project.sql(
        "CREATE SCHEMA src__acme__us__west", "CREATE TABLE src__acme__us__west.orders (id INT)",
        "CREATE SCHEMA src__globex__eu", "CREATE TABLE src__globex__eu.invoices (id INT)",
    )
    discovered = rocky_in_process(["-c", str(project.config), "discover", "-o", "json"])
    assert discovered.returncode == 0, discovered.stderr
    assert (project.root / ".rocky" / "discover.json").is_file()
    code, doc, stderr = dag(project)
    assert code == 0, stderr
    by_id = nodes(doc)
    # the cache adds a table no model reads; the ones models read still resolve to the same ids
    assert "replication:raw/duckdb/globex/eu/invoices" in by_id
    assert by_id["replication:raw/duckdb/globex/eu/invoices"]["target"]["schema"] == "stg__globex__eu"
    assert by_id["transformation:orders_clean"]["depends_on"] == [
        "replication:raw/duckdb/acme/us__west/orders"]
    # a cache that does not read is ignored with a warning, the config still answers
    (project.root / ".rocky" / "discover.json").write_text("{not json")
    code, doc, stderr = dag(project)
    assert code == 0 and "ignoring the discovery cache" in stderr
    assert "replication:raw/duckdb/globex/eu/invoices" not in nodes(doc)


def test_dag_pipeline_filter_and_errors(project: DuckDBProject) -> None:
    code, doc, _ = dag(project, "--pipeline", "models")
    assert code == 0 and {n["pipeline"] for n in doc["nodes"]} == {"models"}
    # edges stay between the nodes shown; depends_on still names the replication asset
    assert doc["summary"]["total_edges"] == 2
    assert nodes(doc)["transformation:orders_clean"]["depends_on"] == [
        "replication:raw/duckdb/acme/us__west/orders"]
    bad = rocky_in_process(["-c", str(project.config), "dag", "--pipeline", "quality"])
    assert bad.returncode == 1
    assert bad.error_lines == ["error: pipeline 'quality' is a quality pipeline; rocky dag shows "
                               "transformation models and replicated tables; name a transformation or "
                               "replication pipeline, or omit --pipeline"]
    (project.root / "models" / "marts" / "recent.toml").write_text('colour = "red"\n')
    broken = rocky_in_process(["-c", str(project.config), "dag"])
    assert broken.returncode == 1 and len(broken.error_lines) == 1
    assert "unknown key 'colour'" in broken.error_lines[0]


def test_dag_table_output(project: DuckDBProject) -> None:
    result = rocky_in_process(["-c", str(project.config), "dag", "-o", "table"])
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "5 node(s), 4 edge(s), 4 layer(s)"
    assert lines[1].split() == ["node", "pipeline", "asset", "key", "upstream"]
    assert any(line.split()[:3] == ["transformation:order_totals", "models", "wh.marts.order_totals"]
               for line in lines)
