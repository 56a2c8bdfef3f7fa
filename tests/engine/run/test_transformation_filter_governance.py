"""`rocky run` flags and target settings a transformation pipeline used to ignore silently: ``--filter``
is refused, ``[target.governance] auto_create_schemas = false`` is honoured (real subprocesses)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import WarehouseProject

GOVERNANCE = "\n[pipeline.models.target.governance]\nauto_create_schemas = false\n"


def two_models(wp: WarehouseProject) -> None:
    wp.model("base", "SELECT 1 AS id")
    wp.model("fct", "SELECT id FROM base", toml='[target]\nschema = "marts"\n')


def test_filter_on_a_transformation_pipeline_is_refused(wp: WarehouseProject) -> None:
    two_models(wp)
    res = wp.cli("run", "--filter", "table=fct")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (
        "error: --filter applies to replication pipelines; 'models' is a transformation pipeline; "
        "drop --filter or use --model NAME to run one model\n"
    )
    assert wp.relation_kind("main", "base") is None


def test_filter_on_a_quality_pipeline_is_refused(wp: WarehouseProject) -> None:
    wp.write_config(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n[pipeline.dq]\ntype = "quality"\n'
        '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "main"\n[pipeline.dq.checks]\nrow_count = true\n'
    )
    res = wp.cli("run", "--pipeline", "dq", "--filter", "id=x")
    assert res.returncode == 1
    assert res.stderr == (
        "error: --filter applies to replication pipelines; 'dq' is a quality pipeline; drop --filter\n"
    )


def test_missing_schema_without_auto_create_fails_before_building(wp: WarehouseProject) -> None:
    two_models(wp)
    wp.config.write_text(wp.config.read_text() + GOVERNANCE)
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == (
        "error: target schema 'wh.marts' of model 'fct' does not exist; create it, or set "
        "auto_create_schemas = true under the pipeline's [target.governance]"
    )
    assert [line for line in res.stderr.splitlines() if line.startswith("error:")] == [
        res.stderr.splitlines()[-1]
    ]
    # Nothing built: not the model in the existing schema either, and no schema created.
    assert wp.relation_kind("main", "base") is None
    assert wp.query("SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'marts'") == [(0,)]


def test_existing_schema_without_auto_create_runs(wp: WarehouseProject) -> None:
    two_models(wp)
    wp.config.write_text(wp.config.read_text() + GOVERNANCE)
    wp.sql("CREATE SCHEMA marts")
    res = wp.cli("run", "--output", "json")
    assert res.returncode == 0, res.stderr
    assert res.json["permissions"]["schemas_created"] == 0
    assert wp.relation_kind("marts", "fct") == "BASE TABLE"


def test_auto_create_is_the_default(wp: WarehouseProject) -> None:
    two_models(wp)
    out = wp.run()
    assert out.status == "Success" and out.permissions.schemas_created == 1
    assert wp.relation_kind("marts", "fct") == "BASE TABLE"
