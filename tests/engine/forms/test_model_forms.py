"""Upstream model forms: ``@var(name)`` / ``@var(name, default)`` markers and ``[strategy]`` in
``models/_defaults.toml`` (issue 15 part B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.errors import ModelError
from rocky_engine.models.sql_refs import render_vars
from tests.engine.forms.kit import doc, rocky
from tests.fixtures.projects import TRANSFORMATION_TOML, DuckDBProject


def _models_project(root: Path, models: dict[str, str]) -> DuckDBProject:
    project = DuckDBProject(root)
    project.write_config(TRANSFORMATION_TOML.format(pipeline="models"))
    for rel, text in models.items():
        path = root / "models" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return project


@pytest.mark.parametrize(
    ("sql", "variables", "expected"),
    [
        ("SELECT @var(limit_rows)", {"limit_rows": "5"}, "SELECT 5"),
        ("SELECT @var( limit_rows , 10 )", {}, "SELECT 10"),
        ("SELECT @var(limit_rows, 10)", {"limit_rows": "7"}, "SELECT 7"),
        ("SELECT '@var(day, 2024-01-01)'", {}, "SELECT '2024-01-01'"),
        ("SELECT @var('region', 'eu')", {}, "SELECT eu"),
        ("SELECT @var(a) + {{ var('a') }}", {"a": "1"}, "SELECT 1 + 1"),
    ],
)
def test_at_var_renders_like_the_brace_form(sql: str, variables: dict[str, str], expected: str) -> None:
    assert render_vars(sql, variables, model="m") == expected


def test_missing_at_var_is_one_line_naming_it() -> None:
    with pytest.raises(ModelError) as info:
        render_vars("SELECT * FROM t WHERE d > @var(start_date)", {}, model="stg")
    assert str(info.value) == (
        "model 'stg' uses variable 'start_date' but no value was given; "
        "pass --var start_date=<value> or write @var(start_date, <default>)"
    )


def test_at_var_in_a_run(tmp_path: Path) -> None:
    project = _models_project(tmp_path, {
        "limited.sql": "SELECT * FROM range(@var(n, 3)) AS t(i) WHERE i >= @var(low)\n",
    })
    result = rocky(project, "run", "--var", "low=1")
    assert result.returncode == 0, result.stderr
    assert project.query("SELECT COUNT(*) FROM wh.main.limited") == [(2,)]
    result = rocky(project, "run", "--var", "low=0", "--var", "n=5")
    assert project.query("SELECT COUNT(*) FROM wh.main.limited") == [(5,)]

    missing = rocky(project, "run")
    assert missing.returncode == 1
    [error] = doc(missing)["errors"]
    assert error["failure_kind"] == "compile-error"
    assert error["error"].startswith("model 'limited' uses variable 'low' but no value was given")


def test_defaults_strategy_applies_to_every_model_below(tmp_path: Path) -> None:
    project = _models_project(tmp_path, {
        "_defaults.toml": '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n',
        "events.sql": "SELECT TIMESTAMP '2026-01-01' + INTERVAL (i) DAY AS ts, i FROM range(3) AS t(i)\n",
        "marts/_defaults.toml": '[strategy]\ntype = "view"\n',
        "marts/daily.sql": "SELECT COUNT(*) AS n FROM events\n",
        "snap.sql": "SELECT 1 AS x\n",
        "snap.toml": '[strategy]\ntype = "full_refresh"\n',
    })
    result = rocky(project, "run")
    assert result.returncode == 0, result.stderr
    strategies = {m["asset_key"][-1]: m["metadata"]["strategy"] for m in doc(result)["materializations"]}
    assert strategies == {"events": "incremental", "daily": "view", "snap": "full_refresh"}
    kinds = dict(project.query(
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
    ))
    assert kinds == {"events": "BASE TABLE", "daily": "VIEW", "snap": "BASE TABLE"}


def test_defaults_strategy_is_checked_like_a_sidecars(tmp_path: Path) -> None:
    project = _models_project(tmp_path, {
        "_defaults.toml": '[strategy]\ntype = "incremental"\n',
        "m.sql": "SELECT 1 AS x\n",
    })
    result = rocky(project, "run")
    assert result.returncode == 1
    [line] = result.error_lines
    assert "_defaults.toml" in line and "strategy 'incremental' needs `timestamp_column`" in line
