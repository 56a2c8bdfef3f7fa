"""Checks of a replication into Spark run in the Spark dialect (quoted columns, literals, RLIKE).

The replication runner once left its checks the ANSI dialect, which on Spark compares the string ``"s"``
instead of the column, fails ``~`` as a syntax error, and reads ``'it''s a\\b'`` as ``it's a`` +
backspace. One DuckDB -> Spark run copies two tiny tables: ``exact`` holds exactly the configured texts
(every assertion must pass), ``mangled`` what a wrong rule reads them as (every assertion must fail).
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

from tests.engine.replication.conftest import ReplicationProject
from tests.fixtures.literal_checks import CHECKS, ROWS, assertions_toml
from tests.fixtures.spark_server import SparkServer


def test_replication_checks_on_spark_compare_the_exact_text(
    spark_server: SparkServer, tmp_path: Path
) -> None:
    stem = uuid.uuid4().hex[:8]
    src, stg = f"src{stem}", f"stg{stem}"
    rp = ReplicationProject(tmp_path)
    rp.write_config(textwrap.dedent(f"""\
        [adapter.wh]
        type = "duckdb"
        path = "wh.duckdb"

        [adapter.lake]
        type = "spark"
        remote = "{spark_server.url}"

        [pipeline.raw]
        type = "replication"
        strategy = "full_refresh"

        [pipeline.raw.source]
        adapter = "wh"

        [pipeline.raw.source.schema_pattern]
        prefix = "{src}"
        separator = "__"
        components = ["source"]

        [pipeline.raw.target]
        adapter = "lake"
        catalog_template = "spark_catalog"
        schema_template = "{stg}__{{source}}"
    """) + "".join(assertions_toml("raw", name) for name in ROWS))
    rp.sql(f"CREATE SCHEMA {src}__shop",
           *(f"CREATE TABLE {src}__shop.{name} AS {select}" for name, select in ROWS.items()))
    try:
        out = rp.run()
        assert sorted(m.asset_key[-1] for m in out.materializations) == ["exact", "mangled"], out.errors
        by_table = {r.asset_key[-1]: {c.name: c for c in r.checks} for r in out.check_results}
        assert {name: set(checks) for name, checks in by_table.items()} == {name: CHECKS for name in ROWS}
        for name, check in by_table["exact"].items():
            assert check.passed is True and check.failing_rows == 0, (name, check)
        for name, check in by_table["mangled"].items():
            assert check.passed is False and check.failing_rows == 1, (name, check)
            assert check.error is None, (name, check)
    finally:
        session = spark_server.session()
        try:
            session.sql(f"DROP DATABASE IF EXISTS {stg}__shop CASCADE")
        finally:
            session.stop()
