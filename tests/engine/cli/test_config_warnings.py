"""An unknown key in a lenient table reaches the user through `rocky run`, `rocky validate` (V012) and
`rocky doctor --check config`, each as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.projects import run_rocky

CONFIG = """\
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[pipeline.models]
type = "transformation"
modles = "sql/**"
"""

WARNING = (
    "unknown key 'modles' in [pipeline.models] is ignored; did you mean 'models'? valid keys: atomic_merges, "
    "checks, depends_on, execution, models, schedule, target, type"
)


def project(tmp_path: Path, config: str = CONFIG) -> Path:
    (tmp_path / "rocky.toml").write_text(config)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("SELECT 1 AS x")
    return tmp_path


def test_run_prints_the_warning_on_stderr_and_still_runs(tmp_path: Path) -> None:
    res = run_rocky(["run", "--output", "table"], cwd=project(tmp_path))
    assert res.returncode == 0, res.stderr
    assert f"warning: {WARNING}\n" in res.stderr
    assert WARNING not in res.stdout


def test_run_names_a_misspelled_duckdb_path(tmp_path: Path) -> None:
    config = CONFIG.replace('path = "wh.duckdb"', 'pth = "wh.duckdb"').replace('modles = "sql/**"\n', "")
    res = run_rocky(["run", "--output", "json"], cwd=project(tmp_path, config))
    assert res.returncode == 0, res.stderr
    [line] = [json.loads(x) for x in res.stderr.splitlines() if "unknown key" in x]
    assert line["level"] == "warning"
    assert line["message"] == (
        "unknown key 'pth' in [adapter.default] is ignored; did you mean 'path'? valid keys: path, retry, "
        "type (without 'path' this adapter is an in-memory database, discarded when rocky exits)"
    )
    assert not (tmp_path / "wh.duckdb").exists()


def test_validate_reports_v012_with_the_key_and_exits_0(tmp_path: Path) -> None:
    res = run_rocky(["validate", "--output", "json"], cwd=project(tmp_path))
    assert res.returncode == 0, res.stderr
    doc = res.json
    assert doc["valid"] is True
    assert doc["messages"] == [
        {"severity": "warning", "code": "V012", "message": WARNING, "field": "pipeline.models.modles"}
    ]
    table = run_rocky(["validate", "--output", "table"], cwd=tmp_path)
    assert f"  warning V012 [pipeline.models.modles]: {WARNING}\n" in table.stdout


def test_doctor_config_check_is_a_warning(tmp_path: Path) -> None:
    res = run_rocky(["doctor", "--check", "config", "--output", "json"], cwd=project(tmp_path))
    assert res.returncode == 0, res.stderr
    [check] = res.json["checks"]
    assert check["name"] == "config" and check["status"] == "warning"
    assert check["message"] == f"1 adapter(s), 1 pipeline(s); 1 warning(s); first: {WARNING}"
