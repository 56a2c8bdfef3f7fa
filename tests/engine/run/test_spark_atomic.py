"""`rocky run` refuses an atomic merge at the capability level the Spark server answers (Parquet: no MERGE).

The server of the test session makes Parquet tables, and the config declares no `table_format`, so the
open succeeds and the run finds the level by probing. A transformation model that asks for an atomic merge
fails before anything of it is written (`compile-error`, the refusal's message), its downstream is
withheld, the other models build (a merge that accepts the rewrite included); a replication pipeline that
asks is refused whole before discovery. The JSON document and the run record say the same.
"""

from __future__ import annotations

import duckdb
import pytest

from rocky_engine.project import load_project
from rocky_engine.state.runs import RunRecord
from rocky_engine.state.store import StateStore
from tests.fixtures.spark_project import SparkProject

pytestmark = pytest.mark.spark

FIX = (
    "point the adapter at a server whose tables are Delta or Iceberg, or remove the atomic request and "
    "accept the rewrite, or use another strategy (delete_insert, full_refresh)"
)


def _records(p: SparkProject) -> list[RunRecord]:
    project = load_project(p.config, env={})
    with StateStore.open(project.state_path(reading=True), writer=False) as store:
        return store.runs.list()


def test_an_atomic_merge_model_fails_alone_before_anything_is_written(spark_project: SparkProject) -> None:
    p = spark_project
    # the pipeline asks for every merge model; `plain` takes the rewrite back for itself
    p.write_config(pipeline_extra="atomic_merges = true\n")
    p.model("stg", "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(id, name)")
    # in a schema of its own, which only it would need: a refused model creates not even that
    alone = f"{p.schema}_atomic"
    p.model("atomic", "SELECT id, name FROM stg")
    (p.root / "models" / "atomic.toml").write_text(
        f'[strategy]\ntype = "merge"\nunique_key = ["id"]\n[target]\nschema = "{alone}"\n')
    p.model("after_atomic", "SELECT count(*) AS n FROM atomic")
    p.model("plain", "SELECT id, name FROM stg", 'type = "merge"\nunique_key = ["id"]\natomic = false')

    try:
        run = p.run()
        schemas = {str(r[0]) for r in p.connection.main.query("SHOW DATABASES")}
    finally:
        p.sql(f"DROP DATABASE IF EXISTS {alone} CASCADE")
    assert run.code == 2, run.result.stderr[-3000:]
    assert alone not in schemas
    doc = run.doc
    assert doc["status"] == "PartialFailure"
    assert sorted(run.by_model()) == ["plain", "stg"]
    message = (
        "model 'atomic' of pipeline 'models' asks for an atomic merge (atomic_merges = true under "
        "[pipeline.models]), but adapter 'default' has no MERGE at the capability level its server answers "
        f"(parquet): the merge would rewrite the whole table through a stage and two renames; {FIX}"
    )
    assert run.errors() == {"atomic": {"asset_key": ["spark_catalog", alone, "atomic"], "error": message,
                                       "failure_kind": "compile-error"}}
    assert [c["model"] for c in doc["contained"]] == ["after_atomic"]
    assert doc["tables_failed"] == 1 and doc["tables_copied"] == 2
    relations = p.relations()
    assert "atomic" not in relations and "after_atomic" not in relations
    assert p.rows("plain") == [(1, "a"), (2, "b")]

    [record] = _records(p)
    assert (record.run_id, record.status, record.exit_code) == (doc["run_id"], "PartialFailure", 2)
    assert record.extra["errors"] == doc["errors"]
    assert {e.model_name: e.status for e in record.models_executed} == {
        "stg": "success", "plain": "success", "atomic": "failed", "after_atomic": "contained"}


REPLICATION = """\
[adapter.src]
type = "duckdb"
path = "src.duckdb"

[adapter.lake]
type = "spark"
remote = "{url}"

[pipeline.raw]
strategy = "merge"
merge_keys = ["id"]
atomic_merges = true

[pipeline.raw.source]
adapter = "src"
schema_pattern = {{ prefix = "src__", components = ["tenant"] }}

[pipeline.raw.target]
adapter = "lake"
catalog_template = "spark_catalog"
schema_template = "{schema}"
"""


def test_an_atomic_merge_replication_is_refused_whole(spark_project: SparkProject) -> None:
    p = spark_project
    p.config.write_text(REPLICATION.format(url=p.server.url, schema=p.schema))
    with duckdb.connect(str(p.root / "src.duckdb")) as con:
        con.execute("CREATE SCHEMA src__acme; CREATE TABLE src__acme.orders AS SELECT 1 AS id, 'x' AS v")

    run = p.run("--pipeline", "raw")
    assert run.code == 1, run.result.stderr[-3000:]
    doc = run.doc
    assert doc["status"] == "Failure" and doc["tables_copied"] == 0
    message = (
        "replication pipeline 'raw' asks for an atomic merge (atomic_merges = true), but adapter 'lake' has "
        "no MERGE at the capability level its server answers (parquet): the merge would rewrite the whole "
        f"table through a stage and two renames; {FIX}"
    )
    assert doc["errors"] == [{"asset_key": [], "error": message, "failure_kind": "compile-error"}]
    assert p.relations() == {}

    [record] = _records(p)
    assert (record.run_id, record.status, record.exit_code) == (doc["run_id"], "Failure", 1)
    assert record.extra["errors"] == doc["errors"]
