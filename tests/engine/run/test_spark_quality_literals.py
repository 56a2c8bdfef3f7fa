"""A quality pipeline on Spark checks in the Spark dialect: quoted columns, literals with quotes and
backslashes, RLIKE.

The quality runner once left its checks the ANSI dialect: ``"s"`` is a string literal in Spark SQL, ``~`` a
syntax error there, and ``'it''s a\\b'`` reads ``it's a`` + backspace. One run checks two views: ``exact``
holds exactly the configured texts (every assertion must pass) and ``mangled`` what a wrong rule reads
them as (every assertion must fail, with no error). Views, so the test writes no files.
"""

from __future__ import annotations

from tests.fixtures.literal_checks import CHECKS, ROWS, assertions_toml
from tests.fixtures.spark_project import SparkProject

QUALITY = """\
[adapter]
type = "spark"
remote = "{url}"

[pipeline.dq]
type = "quality"
{tables}
"""
TABLE = """
[[pipeline.dq.tables]]
catalog = "spark_catalog"
schema = "{schema}"
table = "{table}"
"""


def test_quality_assertions_on_spark_compare_the_exact_text(spark_project: SparkProject) -> None:
    p = spark_project
    tables = "".join(TABLE.format(schema=p.schema, table=name) + assertions_toml("dq", name) for name in ROWS)
    p.config.write_text(QUALITY.format(url=p.server.url, tables=tables))
    for name, select in ROWS.items():
        p.sql(f"CREATE VIEW {p.schema}.{name} AS {select}")

    run = p.run("--pipeline", "dq")

    assert run.code == 1, run.result.stderr[-3000:]
    by_table = {r["asset_key"][-1]: {c["name"]: c for c in r["checks"]} for r in run.doc["check_results"]}
    assert {name: set(checks) for name, checks in by_table.items()} == {name: CHECKS for name in ROWS}
    for name, check in by_table["exact"].items():
        assert check["passed"] is True and check["failing_rows"] == 0, (name, check)
    for name, check in by_table["mangled"].items():
        assert check["passed"] is False and check["failing_rows"] == 1, (name, check)
        assert "error" not in check, (name, check)
