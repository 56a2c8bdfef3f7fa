"""An upstream ``.rocky-state.redb`` beside our ``.rocky-state.db`` is named, never read (issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.forms.kit import doc, rocky
from tests.fixtures.projects import TRANSFORMATION_TOML, DuckDBProject

NOT_READ = "is an upstream Rocky state file (redb format); it is not read"


def _project(root: Path) -> tuple[DuckDBProject, Path]:
    project = DuckDBProject(root)
    project.write_config(TRANSFORMATION_TOML.format(pipeline="models"))
    (root / "models").mkdir()
    (root / "models" / "m.sql").write_text("SELECT 1 AS x\n")
    redb = root / "models" / ".rocky-state.redb"
    redb.write_bytes(b"redb\x1a\x0a\xa9\x0d\x0a" + b"\0" * 64)  # redb's magic number; content never read
    return project, redb


def test_doctor_names_the_upstream_store(tmp_path: Path) -> None:
    project, redb = _project(tmp_path)
    result = rocky(project, "doctor", "--check", "state")
    [check] = doc(result)["checks"]
    assert check["status"] == "warning"
    assert f"{redb} {NOT_READ}" in check["message"]
    assert any(str(redb) in s for s in doc(result)["suggestions"])
    redb.unlink()
    [clean] = doc(rocky(project, "doctor", "--check", "state"))["checks"]
    assert clean["status"] == "healthy"


def test_first_run_says_it_is_not_read_once(tmp_path: Path) -> None:
    project, redb = _project(tmp_path)
    first = rocky(project, "run")
    assert first.returncode == 0, first.stderr
    assert [line for line in first.stderr.splitlines() if NOT_READ in line] != []
    assert (tmp_path / "models" / ".rocky-state.db").is_file()
    assert redb.read_bytes().startswith(b"redb")  # untouched
    second = rocky(project, "run")
    assert second.returncode == 0
    assert NOT_READ not in second.stderr
