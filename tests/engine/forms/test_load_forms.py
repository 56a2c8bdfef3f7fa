"""Upstream load forms: ``catalog = ""`` on the target and ``[pipeline.X.options]`` (issue 15 part B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.forms.kit import doc, rocky
from tests.fixtures.projects import DuckDBProject


def _load_project(root: Path, options: str = "", catalog: str = '""') -> DuckDBProject:
    project = DuckDBProject(root)
    (root / "data").mkdir()
    (root / "data" / "orders.csv").write_text("id,amount\n1,10\n2,20\n3,30\n")
    project.write_config(f"""\
        [adapter]
        type = "duckdb"
        path = "wh.duckdb"

        [pipeline.files]
        type = "load"
        source_dir = "data"
        format = "csv"

        [pipeline.files.target]
        catalog = {catalog}
        schema = "raw"
        table = "orders"
        {options}
        """)
    return project


def test_empty_catalog_is_the_adapters_default_catalog(tmp_path: Path) -> None:
    project = _load_project(tmp_path)
    result = rocky(project, "load", "--pipeline", "files")
    assert result.returncode == 0, result.stderr
    assert doc(result)["total_rows"] == 3
    # the DuckDB adapter's catalog is its file stem: the rows are in wh.raw.orders
    assert project.query("SELECT COUNT(*) FROM wh.raw.orders") == [(3,)]
    assert "unknown key" not in result.stderr


def test_truncate_first_empties_the_target_before_each_load(tmp_path: Path) -> None:
    project = _load_project(tmp_path, "\n[pipeline.files.options]\ntruncate_first = true\n")
    for _ in range(2):
        result = rocky(project, "run", "--pipeline", "files")
        assert result.returncode == 0, result.stderr
    # a second load replaced the rows instead of appending them (3, not 6)
    assert project.query("SELECT COUNT(*), SUM(amount) FROM wh.raw.orders") == [(3, 60)]
    assert "ignored" not in result.stderr


def test_without_truncate_first_a_second_load_appends(tmp_path: Path) -> None:
    project = _load_project(tmp_path)
    for _ in range(2):
        assert rocky(project, "load", "--pipeline", "files").returncode == 0
    assert project.query("SELECT COUNT(*) FROM wh.raw.orders") == [(6,)]


def test_truncate_first_keeps_the_rows_when_the_file_fails(tmp_path: Path) -> None:
    project = _load_project(tmp_path, "\n[pipeline.files.options]\ntruncate_first = true\n")
    assert rocky(project, "load", "--pipeline", "files").returncode == 0
    (tmp_path / "data" / "orders.csv").write_text("id,amount\n1,not-a-number\n")
    project.sql("ALTER TABLE raw.orders ALTER COLUMN amount TYPE INTEGER")
    result = rocky(project, "load", "--pipeline", "files")
    assert result.returncode == 1
    # the emptying is in the failed file's transaction: nothing was lost
    assert project.query("SELECT COUNT(*) FROM wh.raw.orders") == [(3,)]


def test_csv_options_are_passed_to_the_reader(tmp_path: Path) -> None:
    project = _load_project(
        tmp_path, '\n[pipeline.files.options]\ncsv_delimiter = ";"\ncsv_has_header = false\n'
    )
    (tmp_path / "data" / "orders.csv").write_text("1;10\n2;20\n")
    assert rocky(project, "load", "--pipeline", "files").returncode == 0
    assert project.query("SELECT COUNT(*), SUM(column1) FROM wh.raw.orders") == [(2, 30)]


def test_create_table_false_refuses_a_missing_table(tmp_path: Path) -> None:
    project = _load_project(tmp_path, "\n[pipeline.files.options]\ncreate_table = false\n")
    result = rocky(project, "load", "--pipeline", "files")
    assert result.returncode == 1
    [entry] = doc(result)["files"]
    assert entry["error"].startswith(
        "target table wh.raw.orders does not exist and options.create_table = false"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("batch_size = 5000", "batch_size has no meaning here"),
        ("truncate_frist = true", "unknown key 'truncate_frist'"),
    ],
)
def test_option_without_a_meaning_here_is_refused(tmp_path: Path, options: str, message: str) -> None:
    project = _load_project(tmp_path, f"\n[pipeline.files.options]\n{options}\n")
    result = rocky(project, "load", "--pipeline", "files")
    assert result.returncode == 1
    [line] = result.error_lines
    assert "pipeline.files.options" in line and message in line, line


def test_a_catalog_other_than_the_adapters_is_still_refused(tmp_path: Path) -> None:
    project = _load_project(tmp_path, catalog='"elsewhere"')
    result = rocky(project, "load", "--pipeline", "files")
    assert result.returncode == 1
    [line] = result.error_lines
    assert "targets catalog 'elsewhere'" in line
