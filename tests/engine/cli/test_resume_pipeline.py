"""``rocky run --resume-latest`` / ``--resume RUN_ID`` without ``--pipeline`` on a project of several
pipelines (what the published client's ``resume_run()`` sends): the replication pipeline it is about runs,
and when the store cannot say which one, the refusal names them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import DuckDBProject

TWO = """
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.{a}]
type = "replication"
strategy = "full_refresh"
[pipeline.{a}.source.schema_pattern]
prefix = "{a}"
separator = "__"
components = ["source"]
[pipeline.{a}.target]
catalog_template = "wh"
schema_template = "stg_{a}__{{source}}"

[pipeline.{b}]
type = "replication"
strategy = "full_refresh"
[pipeline.{b}.source.schema_pattern]
prefix = "{b}"
separator = "__"
components = ["source"]
[pipeline.{b}.target]
catalog_template = "wh"
schema_template = "stg_{b}__{{source}}"

[pipeline.models]
type = "transformation"
"""


def _project(root: Path) -> DuckDBProject:
    project = DuckDBProject(root)
    project.write_config(TWO.format(a="east", b="west"))
    project.sql(
        "CREATE SCHEMA east__shop", "CREATE TABLE east__shop.a AS SELECT 1 AS id",
        "CREATE TABLE east__shop.b AS SELECT 2 AS id",
        "CREATE SCHEMA west__shop", "CREATE TABLE west__shop.c AS SELECT 3 AS id",
    )
    return project


def _rocky(project: DuckDBProject, *args: str) -> tuple[int, dict[str, object], str]:
    res = rocky_in_process(["-c", str(project.config), "--state-path", str(project.root / "state.db"), *args,
                            "--output", "json"])
    return res.returncode, (json.loads(res.stdout) if res.stdout.strip() else {}), res.stderr


def test_a_resume_runs_the_pipeline_it_is_about(tmp_path: Path) -> None:
    project = _project(tmp_path)
    code, first, err = _rocky(project, "run", "--pipeline", "east", "--filter", "table=a")
    assert code == 0 and first["tables_copied"] == 1, err
    code, resumed, err = _rocky(project, "run", "--resume-latest")
    assert code == 0, err
    # east recorded progress last; its latest run succeeded, so nothing is resumed: an ordinary east run
    assert "resumed_from" not in resumed and "pipeline 'east'" in str(resumed["resume_note"])
    tables = sorted(m["metadata"]["target_table_full_name"] for m in resumed["materializations"])
    assert tables == ["wh.stg_east__shop.a", "wh.stg_east__shop.b"]
    # --resume RUN_ID: the pipeline of that run (west ran last, the east run is named)
    code, _, err = _rocky(project, "run", "--pipeline", "west")
    assert code == 0, err
    code, again, err = _rocky(project, "run", "--resume", first["run_id"])
    assert code == 0 and again["resumed_from"] == first["run_id"], err
    tables = [m["metadata"]["target_table_full_name"] for m in again["materializations"]]
    assert tables == ["wh.stg_east__shop.b"]


def test_without_progress_the_refusal_names_the_pipelines(tmp_path: Path) -> None:
    project = _project(tmp_path)
    code, _, err = _rocky(project, "run", "--resume-latest")
    assert code == 1
    assert ("error: cannot tell which replication pipeline (east, west) the latest resumable run belongs to"
            in err)
    assert "--pipeline NAME" in err
