"""``rocky tick`` and ``GET /api/v1/schedule`` report the same ``config_error`` (issue 13 item 7).

The endpoint used to show only the plan's errors, so a ``freshness = true`` schedule with no budget was
skipped by every tick as ``config_error`` and looked healthy over HTTP. Both now derive the error from
``schedule.plan.resolve_schedule``; this test asks a real ``rocky tick`` and a real ``rocky serve`` about
the same project and compares them pipeline by pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.schedule.kit import transformation, write_project
from tests.engine.server.kit import serving
from tests.fixtures.projects import run_rocky

PROJECT = (
    # no model sets max_lag_seconds and there is no [freshness]: no budget
    transformation("no_budget", "freshness = true")
    # its models do not load (a sidecar with a bad key): the budget cannot be read
    + '\n[pipeline.bad_models]\ntype = "transformation"\nmodels = "broken/**"\n'
    + "\n[pipeline.bad_models.schedule]\nfreshness = true\n"
    + transformation("bad_cron", 'cron = "61 * * * *"')
    + transformation("bad_zone", 'cron = "0 * * * *"\ntimezone = "Mars/Olympus_Mons"')
    + transformation("fine", 'cron = "0 * * * *"')
)


def _project(root: Path) -> Path:
    config = write_project(root, PROJECT, {"good.sql": "select 1 as x\n"})
    broken = root / "broken"
    broken.mkdir()
    (broken / "m.sql").write_text("select 1 as x\n")
    (broken / "m.toml").write_text("frehsness = { max_lag_seconds = 60 }\n")
    return config


def _tick_errors(doc: dict[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    for entry in doc["skipped"]:
        if entry["reason"] == "config_error":
            errors[entry["pipeline"]] = entry["detail"]
    return errors


@pytest.mark.slow
def test_tick_and_the_schedule_endpoint_report_the_same_config_errors(tmp_path: Path) -> None:
    config = _project(tmp_path)
    tick = run_rocky(["-c", str(config), "tick", "--output", "json"], cwd=tmp_path)
    assert tick.returncode == 0, tick.stderr
    from_tick = _tick_errors(tick.json)
    assert set(from_tick) == {"no_budget", "bad_models", "bad_cron", "bad_zone"}
    assert from_tick["no_budget"].startswith("freshness = true but no budget")
    assert from_tick["bad_models"].startswith("freshness budget unavailable: ")
    assert "frehsness" in from_tick["bad_models"]

    with serving(tmp_path, "-c", str(config)) as server, server.client() as client:
        response = client.get("/api/v1/schedule")
    assert response.status_code == 200, response.text
    from_endpoint = {
        p["pipeline"]: p["config_error"] for p in response.json()["pipelines"] if "config_error" in p
    }
    assert from_endpoint == from_tick
