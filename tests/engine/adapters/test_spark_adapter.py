"""The Spark adapter: config, catalog reads against a real server, `rocky doctor`, and the statements of
the MERGE capability level (Delta/Iceberg), which no local server can run: checked as generated SQL."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.adapters.base import TableName
from rocky_engine.adapters.spark.dialect import SparkDialect
from rocky_engine.adapters.sql_types import SqlType
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.postgres import free_port
from tests.fixtures.spark_project import SparkProject


class Recorder:
    """A session that answers DESCRIBE from a fixed table and records every other statement.

    Only for the MERGE level: no server of that level can run on this machine (no Delta Lake offline).
    """

    def __init__(self, table: list[tuple[str, str]], select: list[tuple[str, str]]) -> None:
        self.table, self.select = table, select
        self.statements: list[str] = []

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        self.statements.append(sql)
        return None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        rows = self.select if sql.startswith("DESCRIBE QUERY") else self.table
        return [(name, kind, None) for name, kind in rows]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield


TARGET = TableName("main", "sales", "orders", "`main`.`sales`.`orders`")


def test_merge_level_uses_merge_into_and_create_or_replace() -> None:
    dialect = SparkDialect("delta", merge=True)
    assert dialect.capabilities.merge and dialect.capabilities.replace_table_statement
    same = [("id", "bigint"), ("amount", "double")]
    session = Recorder(same, same)
    dialect.merge(session, TARGET, "SELECT id, amount FROM src", ["id"])  # type: ignore[arg-type]
    assert session.statements == [
        "MERGE INTO `main`.`sales`.`orders` AS t USING (SELECT id, amount FROM src) AS s ON t.`id` = s.`id` "
        "WHEN MATCHED THEN UPDATE SET `amount` = s.`amount` WHEN NOT MATCHED THEN INSERT (`id`, `amount`) "
        "VALUES (s.`id`, s.`amount`)"
    ]
    session = Recorder(same, same)
    dialect.create_or_replace_as_select(session, TARGET, "SELECT 1 AS id", exists_as="table")  # type: ignore[arg-type]
    assert session.statements == ["CREATE OR REPLACE TABLE `main`.`sales`.`orders` AS SELECT 1 AS id"]
    # A new column before a MERGE is added in place; a type change is one CREATE OR REPLACE rewrite.
    session = Recorder(same, [*same, ("note", "string")])
    dialect.merge(session, TARGET, "SELECT * FROM src", ["id"])  # type: ignore[arg-type]
    assert session.statements[0] == "ALTER TABLE `main`.`sales`.`orders` ADD COLUMNS (`note` string)"
    assert session.statements[1].startswith("MERGE INTO ")
    session = Recorder(same, [("id", "bigint"), ("amount", "string")])
    dialect.merge(session, TARGET, "SELECT * FROM src", ["id"])  # type: ignore[arg-type]
    assert len(session.statements) == 1
    assert session.statements[0].startswith("CREATE OR REPLACE TABLE `main`.`sales`.`orders` AS SELECT ")
    assert "LEFT ANTI JOIN" in session.statements[0]


def test_file_level_never_uses_merge_or_replace() -> None:
    dialect = SparkDialect("parquet", merge=False)
    same = [("id", "bigint"), ("amount", "double")]
    session = Recorder(same, same)
    dialect.merge(session, TARGET, "SELECT id, amount FROM src", ["id"])  # type: ignore[arg-type]
    text = " ".join(session.statements)
    assert "MERGE" not in text and "OR REPLACE" not in text and "DELETE" not in text
    assert session.statements[-3:] == [
        "ALTER TABLE `main`.`sales`.`orders` RENAME TO `sales`.`__rocky_old_orders`",
        "ALTER TABLE `main`.`sales`.`__rocky_stage_orders` RENAME TO `sales`.`orders`",
        "DROP TABLE IF EXISTS `main`.`sales`.`__rocky_old_orders`",
    ]


def test_spark_types_and_quoting() -> None:
    d = SparkDialect()
    assert d.quote("a`b") == "`a``b`"
    assert d.parse_type("timestamp") == SqlType("timestamptz")
    assert d.parse_type("timestamp_ntz") == SqlType("timestamp")
    assert d.render_type(SqlType("timestamptz")) == "TIMESTAMP"
    assert d.render_type(SqlType("string", 20)) == "STRING"
    assert d.render_type(SqlType("decimal", 40, 2)) == "DOUBLE"
    assert d.render_type(SqlType("int", 128)) == "DECIMAL(38,0)"
    assert not d.is_safe_widening(SqlType("int", 32), SqlType("int", 64))


@pytest.mark.spark
def test_catalog_reads_hide_rewrite_stages(spark_project: SparkProject) -> None:
    p = spark_project
    p.sql(f"CREATE TABLE {p.schema}.t USING parquet AS SELECT 1 AS id, 'x' AS s")
    p.sql(f"CREATE VIEW {p.schema}.v AS SELECT id FROM {p.schema}.t")
    p.sql(f"CREATE TABLE {p.schema}.__rocky_stage_t USING parquet AS SELECT 1 AS id")
    from rocky_engine.adapters import open_adapter
    from rocky_engine.config import load_config

    adapter = open_adapter(load_config(p.config), "default")
    try:
        rels = {(r.name, r.kind) for r in adapter.list_relations() if r.schema == p.schema}
        assert rels == {("t", "table"), ("v", "view")}
        assert adapter.list_tables(p.schema) == ["t"]
        assert adapter.table_exists(p.schema, "v") and not adapter.table_exists(p.schema, "nope")
        assert [(c.name, c.data_type) for c in adapter.describe(p.schema, "t")] == [
            ("id", "int"), ("s", "string")]
        assert adapter.describe(p.schema, "nope") == []
        assert adapter.qualified(p.schema, "t") == f"`spark_catalog`.`{p.schema}`.`t`"
        assert adapter.ensure_schema(p.schema) is False
        one, two = adapter.session(), adapter.session()
        try:  # every worker has a server-side session of its own
            one.execute("CREATE TEMPORARY VIEW mine AS SELECT 1 AS a")
            assert one.query("SELECT a FROM mine") == [(1,)]
            with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
                two.query("SELECT a FROM mine")
        finally:
            one.close()
            two.close()
    finally:
        adapter.close()


@pytest.mark.spark
def test_doctor_reports_the_endpoint_and_its_capability_level(
    spark_project: SparkProject, tmp_path: Path
) -> None:
    res = rocky_in_process(["-c", str(spark_project.config), "doctor", "--check", "adapters",
                            "--output", "json"])
    assert res.returncode == 0, res.stderr
    (check,) = json.loads(res.stdout)["checks"]
    assert check["status"] == "healthy"
    assert "Spark 4.3.0 at 127.0.0.1:" in check["message"]
    assert "capability level: parquet tables: no MERGE" in check["message"]

    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "rocky.toml").write_text(
        f'[adapter]\ntype = "spark"\nremote = "sc://127.0.0.1:{free_port()}"\n\n'
        '[pipeline.models]\ntype = "transformation"\n'
    )
    res = rocky_in_process(["-c", str(dead / "rocky.toml"), "doctor", "--check", "adapters",
                            "--output", "json"])
    assert res.returncode == 3, res.stderr
    (check,) = json.loads(res.stdout)["checks"]
    assert check["status"] == "critical" and "(connection-failed)" in check["message"]


@pytest.mark.spark
def test_a_declared_table_format_the_server_does_not_have_is_refused(spark_project: SparkProject) -> None:
    spark_project.write_config(adapter_extra='table_format = "delta"\n')
    spark_project.model("m", "SELECT 1 AS id")
    run = spark_project.run()
    assert run.code == 1 and run.doc["status"] == "Failure"
    (error,) = run.doc["errors"]
    assert error["failure_kind"] == "query-rejected"
    assert 'declares table_format = "delta"' in error["error"] and "creates parquet tables" in error["error"]
