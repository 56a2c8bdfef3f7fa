"""The playground's transformation pipeline on a real Spark Connect server, changed in nothing but its
adapter block, builds every model with the same row counts as on DuckDB (issue 19's "done when").

How the sources get there: the playground's models read the ``staging__*`` tables its ``raw`` pipeline
replicates inside the one warehouse. That pipeline cannot run on Spark with only the adapter block
changed: its ``catalog_template = "playground"`` names DuckDB's file catalog, and a Spark session's catalog
is ``spark_catalog``. So the test builds the playground on DuckDB as ``make demo`` does (seed, ``raw``,
``models``: the reference row counts), then replicates the ``staging__*`` tables from that DuckDB file into
Spark with rocky itself (a DuckDB -> Spark replication pipeline of its own), and runs the playground's own
``models`` pipeline against Spark.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.inprocess import assert_no_traceback, rocky_in_process
from tests.fixtures.spark_server import SparkServer

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PLAYGROUND = REPO / "examples" / "playground"
ADAPTER_BLOCK = re.compile(r'^\[adapter\]\ntype = "duckdb"\npath = "playground.duckdb"\n', re.MULTILINE)
MODEL_SCHEMAS = ("staging", "intermediate", "marts")


def _rocky(*argv: str) -> dict[str, object]:
    result = rocky_in_process([*argv, "--output", "json"])
    assert_no_traceback(result, " ".join(argv))
    assert result.returncode == 0, result.stderr[-3000:]
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def _model_tables(doc: dict[str, object]) -> list[str]:
    """``schema.table`` of every model a transformation run built."""
    built = doc["materializations"]
    assert isinstance(built, list)
    return sorted(".".join(m["asset_key"][-2:]) for m in built)


def test_playground_models_on_spark_match_duckdb(spark_server: SparkServer, tmp_path: Path) -> None:
    import duckdb

    duck = tmp_path / "playground"
    skip = shutil.ignore_patterns("*.duckdb*", ".rocky-state*", "__pycache__")
    shutil.copytree(PLAYGROUND, duck, ignore=skip)
    seed = duck / "seed.py"
    namespace: dict[str, object] = {"__file__": str(seed), "__name__": "playground_seed"}
    exec(compile(seed.read_text(), str(seed), "exec"), namespace)  # the playground's own seed, in process
    main = namespace["main"]
    assert callable(main)
    assert main() == 0
    config = duck / "rocky.toml"
    _rocky("-c", str(config), "run", "--pipeline", "raw")
    on_duckdb = _rocky("-c", str(config), "run", "--pipeline", "models")
    models = _model_tables(on_duckdb)
    assert len(models) == 9
    con = duckdb.connect(str(duck / "playground.duckdb"), read_only=True)
    expected = {m: con.execute(f"SELECT count(*) FROM {m}").fetchone()[0] for m in models}  # type: ignore[index]
    con.close()

    session = spark_server.session()
    try:
        # The staging__* tables, replicated from the DuckDB playground by rocky (first pass, Arrow upload).
        copy = tmp_path / "to-spark"
        copy.mkdir()
        (copy / "rocky.toml").write_text(textwrap.dedent(f"""\
            [adapter.duck]
            type = "duckdb"
            path = "{duck / 'playground.duckdb'}"

            [adapter.lake]
            type = "spark"
            remote = "{spark_server.url}"

            [pipeline.sources]
            type = "replication"
            strategy = "full_refresh"

            [pipeline.sources.source]
            adapter = "duck"

            [pipeline.sources.source.schema_pattern]
            prefix = "staging"
            separator = "__"
            components = ["source"]

            [pipeline.sources.target]
            adapter = "lake"
            catalog_template = "spark_catalog"
            schema_template = "staging__{{source}}"
        """))
        copied = _rocky("-c", str(copy / "rocky.toml"), "run", "--pipeline", "sources")
        assert copied["tables_copied"] == 3

        # The playground itself, its adapter block pointed at Spark and nothing else changed.
        spark = tmp_path / "spark"
        shutil.copytree(duck, spark, ignore=shutil.ignore_patterns("*.duckdb*", ".rocky-state*"))
        text, swapped = ADAPTER_BLOCK.subn(f'[adapter]\ntype = "spark"\nremote = "{spark_server.url}"\n',
                                           config.read_text())
        assert swapped == 1, "the playground's adapter block changed shape: update this test"
        (spark / "rocky.toml").write_text(text)
        on_spark = _rocky("-c", str(spark / "rocky.toml"), "run", "--pipeline", "models")
        assert on_spark["status"] == "Success"
        assert _model_tables(on_spark) == models
        counts = {m: session.sql(f"SELECT count(*) FROM {m}").collect()[0][0] for m in models}
        assert counts == expected
        assert all(n > 0 for n in counts.values())
    finally:
        for schema in (*MODEL_SCHEMAS, "staging__orders", "staging__payments"):
            session.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        session.stop()
