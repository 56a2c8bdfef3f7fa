"""``rocky doctor`` as a real subprocess: exit codes, JSON shape, --check."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.hooks.kit import make_project, rocky


def test_healthy_exits_0_with_the_contract_shape(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    proc = rocky(config, "doctor", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(doc) == ["version", "command", "overall", "checks", "suggestions"]
    assert doc["command"] == "doctor" and doc["overall"] == "healthy" and doc["suggestions"] == []
    for check in doc["checks"]:
        assert list(check) == ["name", "status", "message", "duration_ms"]
        assert check["status"] in ("healthy", "warning", "critical")


def test_a_critical_check_exits_3_after_printing_the_json(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    config.write_text(config.read_text() + "\n[pipeline.models.execution]\nconcurency = 4\n")
    proc = rocky(config, "doctor", "--check", "config", "--output", "json")
    assert proc.returncode == 3
    doc = json.loads(proc.stdout)
    assert doc["overall"] == "critical"
    assert [c["name"] for c in doc["checks"]] == ["config"]
    assert "concurency" in doc["checks"][0]["message"]


def test_an_unreadable_state_store_is_a_warning_and_exits_0(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    (tmp_path / "models" / ".rocky-state.db").mkdir()  # cannot be opened, but nothing is damaged
    proc = rocky(config, "doctor", "--output", "table")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("rocky doctor: warning\n")
    assert "state store is unreadable" in proc.stdout


def test_a_damaged_state_store_is_critical_and_exits_3(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    store = tmp_path / "models" / ".rocky-state.db"
    store.write_text("garbage" * 500)
    proc = rocky(config, "doctor", "--output", "table")
    assert proc.returncode == 3, proc.stdout
    assert proc.stdout.startswith("rocky doctor: critical\n")
    assert f"move it aside (mv {store} {store}.corrupt)" in proc.stdout


def test_an_unknown_check_is_a_usage_error(tmp_path: Path) -> None:
    config = make_project(tmp_path)
    proc = rocky(config, "doctor", "--check", "warp_drive")
    assert proc.returncode == 1
    assert "invalid choice: 'warp_drive'" in proc.stderr


def test_a_missing_config_is_critical(tmp_path: Path) -> None:
    proc = rocky(tmp_path / "rocky.toml", "doctor", "--output", "json")
    assert proc.returncode == 3
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["config"]["status"] == "critical"
    assert "config file not found" in checks["config"]["message"]
