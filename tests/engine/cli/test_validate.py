"""`rocky validate` through a real subprocess: JSON, text, exit codes, and no heavy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Runs the real entry point (rocky_engine.cli.main) in a child process. Command modules that do not exist
# yet in this tree are dropped from COMMANDS first, so these tests exercise `validate` whatever state the
# other commands are in; once they all exist this is exactly `python -m rocky_engine.cli.main`.
_ENTRY = (
    "import importlib.util, sys\n"
    "import rocky_engine.cli.main as m\n"
    "for name, mod in list(m.COMMANDS.items()):\n"
    "    if importlib.util.find_spec(mod) is None:\n"
    "        del m.COMMANDS[name]\n"
    "m.main(sys.argv[1:])\n"
)

ADAPTER = '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n'
TRANSFORM = '[pipeline.marts]\ntype = "transformation"\nmodels = "models/**"\n'


def rocky(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", _ENTRY, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def project(tmp_path: Path, toml: str, models: dict[str, str] | None = None) -> Path:
    (tmp_path / "rocky.toml").write_text(toml, encoding="utf-8")
    for name, sql in (models or {}).items():
        path = tmp_path / "models" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sql, encoding="utf-8")
    return tmp_path


def validate_json(cwd: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    proc = rocky(cwd, "validate", "--output", "json", *extra, env=env)
    assert proc.stdout.endswith("}\n"), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def messages(doc: dict[str, object]) -> list[tuple[str, str, str | None]]:
    items = doc["messages"]
    assert isinstance(items, list)
    return [(m["severity"], m["code"], m.get("field")) for m in items]


VALID = (
    ADAPTER
    + """
[pipeline.raw]
[pipeline.raw.source]
schema_pattern = { prefix = "src__", components = ["tenant"] }
[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}"
[pipeline.raw.schedule]
cron = "0 3 * * *"
timezone = "Europe/Lisbon"
"""
    + TRANSFORM
    + '[pipeline.marts.schedule]\nafter = ["raw"]\n'
    + '[[hook.on_pipeline_error]]\ncommand = "echo failed"\n'
)
MODELS = {"stg_orders.sql": "SELECT 1 AS id", "fct_orders.sql": "SELECT id FROM stg_orders"}


def test_valid_project_json(tmp_path: Path) -> None:
    cwd = project(tmp_path, VALID, MODELS)
    code, doc = validate_json(cwd)
    assert code == 0
    assert doc["command"] == "validate" and doc["valid"] is True
    assert doc["messages"] == []
    assert doc["adapters"] == [{"name": "default", "adapter_type": "duckdb", "ok": True}]
    # the published shape: pipeline_type (also as type), ok, the target templates and the strategy
    assert doc["pipelines"] == [
        {"name": "raw", "type": "replication", "pipeline_type": "replication", "ok": True,
         "catalog_template": "wh", "schema_template": "stg__{tenant}", "strategy": "incremental"},
        {"name": "marts", "type": "transformation", "pipeline_type": "transformation", "ok": True,
         "catalog_template": "", "schema_template": "", "strategy": "transformation"},
    ]
    assert doc["models"] == {"count": 2, "found": True, "dag_valid": True}


def test_valid_project_text_and_md(tmp_path: Path) -> None:
    cwd = project(tmp_path, VALID, MODELS)
    proc = rocky(cwd, "validate", "-o", "table")
    assert proc.returncode == 0
    assert proc.stdout == "✓ config valid: 1 adapter(s), 2 pipeline(s), 2 model(s)\n"
    proc = rocky(cwd, "-o", "md", "validate")
    assert proc.returncode == 0 and proc.stdout == "**config valid**\n"


def test_config_flag_from_another_directory(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    project(proj, VALID, MODELS)
    code, doc = validate_json(tmp_path, "-c", "proj/rocky.toml")
    assert code == 0 and doc["models"]["count"] == 2


def test_bad_cron(tmp_path: Path) -> None:
    cwd = project(tmp_path, VALID.replace("0 3 * * *", "0 3 * *"), MODELS)
    code, doc = validate_json(cwd)
    assert code == 1 and doc["valid"] is False
    assert messages(doc) == [("error", "V006", "pipeline.raw.schedule.cron")]
    proc = rocky(cwd, "validate", "-o", "table")
    assert proc.returncode == 1
    assert proc.stdout.startswith(
        "✗ config invalid (1 error, 0 warnings)\n  error   V006 [pipeline.raw.schedule.cron]: "
    )


def test_unknown_timezone(tmp_path: Path) -> None:
    cwd = project(tmp_path, VALID.replace("Europe/Lisbon", "Europe/Atlantis"), MODELS)
    code, doc = validate_json(cwd)
    assert code == 1
    assert messages(doc) == [("error", "V007", "pipeline.raw.schedule.timezone")]
    assert "unknown timezone 'Europe/Atlantis'" in json.dumps(doc)


def test_after_cycle(tmp_path: Path) -> None:
    toml = VALID.replace('timezone = "Europe/Lisbon"\n', 'timezone = "Europe/Lisbon"\nafter = ["marts"]\n')
    code, doc = validate_json(project(tmp_path, toml, MODELS))
    assert code == 1
    assert messages(doc) == [("error", "V010", "pipeline.marts.schedule.after")]
    assert doc["messages"][0]["message"].startswith(  # type: ignore[index]
        "schedule after cycle detected involving: ['marts', 'raw']"
    )


def test_scheduled_load_pipeline(tmp_path: Path) -> None:
    toml = (
        VALID
        + '[pipeline.files]\ntype = "load"\nsource_dir = "data"\n'
        + 'target = { catalog = "wh", schema = "raw" }\n'
        + '[pipeline.files.schedule]\ncron = "*/5 * * * *"\n'
    )
    code, doc = validate_json(project(tmp_path, toml, MODELS))
    assert code == 1
    assert messages(doc) == [("error", "V009", "pipeline.files.schedule")]


def test_unknown_pipeline_type_is_v001_with_json(tmp_path: Path) -> None:
    cwd = project(tmp_path, ADAPTER + '[pipeline.orders]\ntype = "replicate"\n')
    proc = rocky(cwd, "validate", "--output", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["valid"] is False and doc["adapters"] == [] and doc["pipelines"] == []
    assert doc["models"] == {"count": 0, "found": False, "dag_valid": True}
    assert doc["messages"] == [
        {
            "severity": "error",
            "code": "V001",
            "message": f"{cwd / 'rocky.toml'}: pipeline.orders.type: unknown pipeline type 'replicate' for "
            "pipeline 'orders'; valid types: replication, transformation, quality, snapshot, load",
            "field": "pipeline.orders.type",
        }
    ]


def test_missing_models_dir(tmp_path: Path) -> None:
    code, doc = validate_json(project(tmp_path, ADAPTER + TRANSFORM))
    assert code == 1
    assert messages(doc) == [("error", "V003", "pipeline.marts.models")]
    assert [(p["name"], p["type"], p["ok"]) for p in doc["pipelines"]] == [("marts", "transformation", False)]
    assert doc["models"] == {"count": 0, "found": False, "dag_valid": True}


def test_model_cycle(tmp_path: Path) -> None:
    models = {"a.sql": "SELECT * FROM b", "b.sql": "SELECT * FROM a"}
    code, doc = validate_json(project(tmp_path, ADAPTER + TRANSFORM, models))
    assert code == 1 and messages(doc) == [("error", "V004", "pipeline.marts.models")]


def test_missing_config_file(tmp_path: Path) -> None:
    code, doc = validate_json(tmp_path)
    assert code == 1
    assert doc["messages"] == [
        {
            "severity": "error",
            "code": "V001",
            "message": "config file not found: rocky.toml; create it or pass -c/--config PATH",
        }
    ]


def test_unset_variable_and_default(tmp_path: Path) -> None:
    cwd = project(tmp_path, ADAPTER.replace("wh.duckdb", "${WH_FILE}") + TRANSFORM, {"a.sql": "SELECT 1"})
    code, doc = validate_json(cwd)
    assert code == 1
    assert doc["messages"][0]["message"] == (  # type: ignore[index]
        f"environment variable WH_FILE is not set (referenced in {cwd / 'rocky.toml'}); "
        "export it or use ${WH_FILE:-default}"
    )
    code, doc = validate_json(cwd, env={"WH_FILE": "prod.duckdb"})
    assert code == 0 and doc["valid"] is True


def test_warnings_alone_exit_zero(tmp_path: Path) -> None:
    toml = ADAPTER + TRANSFORM + '[[hook.on_pipeline_eror]]\ncommand = "x"\n'
    cwd = project(tmp_path, toml, {"a.sql": "SELECT 1"})
    code, doc = validate_json(cwd)
    assert code == 0 and doc["valid"] is True
    assert messages(doc) == [("warning", "V012", "hook.on_pipeline_eror")]
    proc = rocky(cwd, "validate", "-o", "table")
    assert proc.returncode == 0
    assert proc.stdout.startswith("✓ config valid: 1 adapter(s), 1 pipeline(s), 1 model(s)\n  warning V012 ")


def test_validate_does_not_import_heavy_modules(tmp_path: Path) -> None:
    cwd = project(tmp_path, VALID, MODELS)
    code = (
        "import sys\n"
        "import rocky_engine.cli.main as m\n"
        "m.COMMANDS = {'validate': m.COMMANDS['validate']}\n"
        "rc = m.run_cli(['validate', '--output', 'json'])\n"
        "names = ('duckdb', 'pyarrow', 'httpx', 'starlette', 'uvicorn')\n"
        "heavy = sorted(n for n in names if n in sys.modules)\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr


def test_a_webhook_url_without_scheme_is_v001_and_never_printed(tmp_path: Path) -> None:
    token = "XOXB-T0KEN-never-printed"
    cwd = project(tmp_path, ADAPTER + f'[hook.webhooks.on_pipeline_error]\nurl = "hooks.slack.com/{token}"\n')
    proc = rocky(cwd, "validate", "--output", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert messages(doc) == [("error", "V001", "hook.webhooks.on_pipeline_error.url")]
    assert token not in proc.stdout + proc.stderr
