"""``--models DIR`` (and ``--all``) on ``rocky run`` and ``rocky ci``, as upstream clients send them
(``rocky_sdk``: ``run(run_models=True)`` sends ``--models DIR --all``, ``ci()`` sends ``--models DIR``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.cli.main import build_parser
from tests.engine.forms.kit import doc, rocky
from tests.fixtures.projects import DuckDBProject

CONFIG = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
type = "load"
source_dir = "data"

[pipeline.raw.target]
catalog = "wh"
schema = "raw"

[pipeline.models]
type = "transformation"
models = "models/**"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DuckDBProject:
    """Two pipelines (load + transformation); the configured models/ and another directory, alt/."""
    project = DuckDBProject(tmp_path)
    project.write_config(CONFIG)
    (tmp_path / "data").mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "configured.sql").write_text("SELECT 1 AS x\n")
    (tmp_path / "alt").mkdir()
    (tmp_path / "alt" / "first.sql").write_text("SELECT 1 AS x\n")
    (tmp_path / "alt" / "second.sql").write_text("SELECT x + 1 AS x FROM first\n")
    monkeypatch.chdir(tmp_path)  # DIR is relative to the working directory, as upstream clients send it
    return project


def _built(result_doc: dict[str, object]) -> list[str]:
    return sorted(m["asset_key"][-1] for m in result_doc["materializations"])  # type: ignore[attr-defined, index]


def test_run_models_dir_points_the_transformation_pipeline_there(project: DuckDBProject) -> None:
    result = rocky(project, "run", "--models", "alt", "--all")
    assert result.returncode == 0, result.stderr
    # no --pipeline although two exist: --models chose the one transformation pipeline
    assert _built(doc(result)) == ["first", "second"]
    assert project.query("SELECT x FROM wh.main.second") == [(2,)]
    assert project.query(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'configured'"
    ) == [(0,)]


def test_run_without_models_dir_reads_the_configured_glob(project: DuckDBProject) -> None:
    result = rocky(project, "run", "--pipeline", "models")
    assert result.returncode == 0, result.stderr
    assert _built(doc(result)) == ["configured"]


def test_model_and_models_are_distinct_flags(project: DuckDBProject) -> None:
    parser, _ = build_parser()
    args = parser.parse_args(["run", "--model", "second", "--models", "alt"])
    # `--model` may be single or repeatable; either way it holds the model and `--models` the directory
    assert args.models == "alt" and args.model in ("second", ["second"])
    result = rocky(project, "run", "--models", "alt", "--model", "first")
    assert result.returncode == 0, result.stderr
    assert _built(doc(result)) == ["first"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "nowhere"], "--models nowhere:"),
        (["--models", "alt", "--pipeline", "raw"],
         "--models applies to transformation pipelines; pipeline 'raw' is a load pipeline"),
        (["--models", "alt", "--all", "--model", "first"], "--all and --model are exclusive"),
        (["--all", "--pipeline", "raw"], "--all applies to transformation pipelines"),
    ],
)
def test_run_models_flags_refusals(project: DuckDBProject, args: list[str], message: str) -> None:
    result = rocky(project, "run", *args)
    assert result.returncode == 1
    [line] = result.error_lines
    assert message in line, line


def test_ci_models_dir(project: DuckDBProject) -> None:
    (project.root / "alt" / "broken.sql").write_text("SELECT nope FROM first\n")
    result = rocky(project, "ci", "--models", "alt")
    report = doc(result)
    assert result.returncode == 1
    # severities are the published enum (Error, Warning, Info)
    models = {d.get("model") for d in report["diagnostics"] if d.get("severity") == "Error"}
    assert "broken" in models, report
    clean = rocky(project, "ci")
    assert clean.returncode == 0, clean.stdout


def test_ci_models_dir_when_the_configured_directory_is_missing(project: DuckDBProject) -> None:
    import shutil

    shutil.rmtree(project.root / "models")
    assert rocky(project, "ci").returncode == 1  # V003: the configured models directory is missing
    result = rocky(project, "ci", "--models", "alt")
    assert result.returncode == 0, result.stdout  # validated and built what --models points at
    assert doc(result)["models_built"] == 2
