"""validate_config / validate_models: each V-code, cycles, cron and timezone checks, the result shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocky_engine.config import RockyConfig, load_config
from rocky_engine.config.validation import (
    ValidationMessage,
    cron_problem,
    timezone_problem,
    validate_config,
)
from rocky_engine.graph import find_cycles
from rocky_engine.ops.validate import ValidateOutput, run_validation, validate_models
from rocky_engine.output import to_json
from rocky_engine.wire.validate import AdapterSummary, ModelsSummary

ADAPTER = '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n'
REPLICATION = """
[pipeline.raw]
[pipeline.raw.source]
schema_pattern = { prefix = "src__", components = ["tenant", "regions..."] }
[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}__{regions}"
"""


def load(tmp_path: Path, text: str) -> RockyConfig:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={})


def codes(messages: list[ValidationMessage]) -> list[tuple[str, str, str | None]]:
    return [(m.severity, m.code, m.field) for m in messages]


def test_valid_config_has_no_messages(tmp_path: Path) -> None:
    text = (
        ADAPTER + REPLICATION + "[pipeline.raw.schedule]\ncron = '0 3 * * *'\ntimezone = 'Europe/Lisbon'\n"
        '[pipeline.t]\ntype = "transformation"\ndepends_on = ["raw"]\n'
        '[pipeline.t.schedule]\nafter = ["raw"]\n'
    )
    assert validate_config(load(tmp_path, text)) == []


def test_empty_project_warns(tmp_path: Path) -> None:
    assert codes(validate_config(load(tmp_path, ADAPTER))) == [("warning", "V020", None)]


def test_unknown_adapter_reference(tmp_path: Path) -> None:
    text = ADAPTER + '[pipeline.t]\ntype = "transformation"\ntarget = { adapter = "pg" }\n'
    [msg] = validate_config(load(tmp_path, text))
    assert (msg.severity, msg.code, msg.field) == ("error", "V002", "pipeline.t.target.adapter")
    assert msg.message == (
        "pipeline.t.target.adapter names adapter 'pg', which is not defined; defined adapters: default. "
        "Add an [adapter.pg] table or use a defined name"
    )


def test_no_adapters_at_all(tmp_path: Path) -> None:
    [msg] = validate_config(load(tmp_path, '[pipeline.t]\ntype = "transformation"\n'))
    assert msg.code == "V002" and "defined adapters: (none defined)" in msg.message


def test_adapter_references_of_every_pipeline_and_connector(tmp_path: Path) -> None:
    text = (
        REPLICATION.replace(
            "[pipeline.raw.source]\n",
            '[pipeline.raw.source]\nadapter = "a1"\ndiscovery = { adapter = "a2" }\n',
        ).replace('catalog_template = "wh"', 'adapter = "a3"\ncatalog_template = "wh"')
        + '[pipeline.s]\ntype = "snapshot"\nunique_key = ["id"]\nupdated_at = "u"\n'
        'source = { adapter = "a4", catalog = "c", schema = "s", table = "t" }\n'
        'target = { adapter = "a5", catalog = "c", schema = "s", table = "t2" }\n'
        '[pipeline.q]\ntype = "quality"\ntables = [{ catalog = "c", schema = "s" }]\n'
        'target = { adapter = "a6" }\n[pipeline.q.checks]\nrow_count = true\n'
        '[pipeline.l]\ntype = "load"\nsource_dir = "d"\n'
        'target = { adapter = "a7", catalog = "c", schema = "s" }\n'
        '[connector.c]\nmanifest = "rocky.toml"\noutput_uri = "file://./x"\n'
        'target = { adapter = "a8", catalog = "c", schema = "s", table = "t" }\n'
    )
    fields = [m.field for m in validate_config(load(tmp_path, text)) if m.code == "V002"]
    assert fields == [
        "pipeline.raw.source.adapter",
        "pipeline.raw.source.discovery.adapter",
        "pipeline.raw.target.adapter",
        "pipeline.s.source.adapter",
        "pipeline.s.target.adapter",
        "pipeline.q.target.adapter",
        "pipeline.l.target.adapter",
        "connector.c.target.adapter",
    ]


def test_discovery_adapter_used_as_warehouse(tmp_path: Path) -> None:
    text = (
        '[adapter.ft]\ntype = "fivetran"\napi_key = "k"\napi_secret = "s"\ndestination_id = "d"\n'
        + '[adapter.default]\ntype = "duckdb"\n'
        + REPLICATION.replace(
            "[pipeline.raw.source]\n",
            '[pipeline.raw.source]\nadapter = "ft"\ndiscovery = { adapter = "ft" }\n',
        )
    )
    assert codes(validate_config(load(tmp_path, text))) == [("error", "V014", "pipeline.raw.source.adapter")]


def test_depends_on_unknown_and_cycle(tmp_path: Path) -> None:
    text = (
        ADAPTER
        + '[pipeline.a]\ntype = "transformation"\ndepends_on = ["b", "ghost"]\n'
        + '[pipeline.b]\ntype = "transformation"\ndepends_on = ["a"]\n'
    )
    msgs = validate_config(load(tmp_path, text))
    assert codes(msgs) == [
        ("error", "V011", "pipeline.a.depends_on"),
        ("error", "V015", "pipeline.a.depends_on"),
    ]
    assert msgs[0].message == "pipeline 'a' depends_on 'ghost', which is not a pipeline; pipelines: a, b"
    assert msgs[1].message.startswith("depends_on cycle detected involving: ['a', 'b']")


def schedule(tmp_path: Path, body: str, extra: str = "") -> list[ValidationMessage]:
    text = ADAPTER + '[pipeline.t]\ntype = "transformation"\n[pipeline.t.schedule]\n' + body + extra
    return validate_config(load(tmp_path, text))


@pytest.mark.parametrize("cron", ["0 3 * *", "0 3 * * * *", "@daily", "61 * * * *", "0 3 * * mon-xyz"])
def test_bad_cron(tmp_path: Path, cron: str) -> None:
    [msg] = schedule(tmp_path, f'cron = "{cron}"\n')
    assert (msg.code, msg.field) == ("V006", "pipeline.t.schedule.cron")
    assert msg.message.startswith(f"pipeline 't': cron '{cron}' ")


def test_cron_problem_wording() -> None:
    assert cron_problem("*/5 * * * *") is None
    assert cron_problem("0 3 * * 1-5") is None
    assert cron_problem("0 3 * *") == (
        "cron '0 3 * *' has 4 fields; write exactly 5: minute hour day-of-month month day-of-week "
        '(e.g. "0 3 * * *")'
    )
    assert cron_problem("99 3 * * *") == (
        "cron '99 3 * * *' is not a valid cron expression (minute hour day-of-month month day-of-week)"
    )


@pytest.mark.parametrize("tz", ["Mars/Base", "utc", "", "America", "../etc/passwd"])
def test_unknown_timezone(tmp_path: Path, tz: str) -> None:
    [msg] = schedule(tmp_path, f'timezone = "{tz}"\n')
    assert (msg.code, msg.field) == ("V007", "pipeline.t.schedule.timezone")
    assert msg.message == (
        f"pipeline 't': unknown timezone '{tz}'; use an IANA name such as \"UTC\" or \"Europe/Lisbon\""
    )


def test_project_timezone_checked(tmp_path: Path) -> None:
    msgs = validate_config(load(tmp_path, ADAPTER + '[schedule]\ntimezone = "Nowhere/City"\n'))
    assert ("error", "V007", "schedule.timezone") in codes(msgs)
    assert timezone_problem("Europe/Lisbon") is None and timezone_problem("UTC") is None


def test_after_unknown(tmp_path: Path) -> None:
    [msg] = schedule(tmp_path, 'after = ["ghost"]\n')
    assert (msg.code, msg.field) == ("V008", "pipeline.t.schedule.after")
    assert msg.message == "pipeline 't' schedule after names 'ghost', which is not a pipeline; pipelines: t"


def test_scheduled_load_and_after_load(tmp_path: Path) -> None:
    text = (
        ADAPTER
        + '[pipeline.l]\ntype = "load"\nsource_dir = "d"\ntarget = { catalog = "c", schema = "s" }\n'
        + "[pipeline.l.schedule]\ncron = '0 * * * *'\n"
        + '[pipeline.t]\ntype = "transformation"\n[pipeline.t.schedule]\nafter = ["l"]\n'
    )
    msgs = validate_config(load(tmp_path, text))
    assert codes(msgs) == [
        ("error", "V009", "pipeline.l.schedule"),
        ("error", "V009", "pipeline.t.schedule.after"),
    ]
    assert msgs[0].message.startswith("load pipeline 'l' cannot be scheduled")
    assert msgs[1].message.startswith("pipeline 't' schedule after names load pipeline 'l'")


def test_disabled_schedule_on_load_still_rejected(tmp_path: Path) -> None:
    text = (
        ADAPTER + '[pipeline.l]\ntype = "load"\nsource_dir = "d"\ntarget = { catalog = "c", schema = "s" }\n'
        "[pipeline.l.schedule]\nenabled = false\n"
    )
    assert codes(validate_config(load(tmp_path, text))) == [("error", "V009", "pipeline.l.schedule")]


def test_after_cycle(tmp_path: Path) -> None:
    text = (
        ADAPTER
        + '[pipeline.a]\ntype = "transformation"\n[pipeline.a.schedule]\nafter = ["c"]\n'
        + '[pipeline.b]\ntype = "transformation"\n[pipeline.b.schedule]\nafter = ["a"]\n'
        + '[pipeline.c]\ntype = "transformation"\n[pipeline.c.schedule]\nafter = ["b"]\n'
        + '[pipeline.d]\ntype = "transformation"\n[pipeline.d.schedule]\nafter = ["d"]\n'
    )
    msgs = validate_config(load(tmp_path, text))
    assert codes(msgs) == [
        ("error", "V010", "pipeline.a.schedule.after"),
        ("error", "V010", "pipeline.d.schedule.after"),
    ]
    assert msgs[0].message.startswith("schedule after cycle detected involving: ['a', 'b', 'c']")
    assert msgs[1].message.startswith("schedule after cycle detected involving: ['d']")


def test_find_cycles() -> None:
    assert find_cycles({"a": ["b"], "b": ["c"], "c": []}) == []
    assert find_cycles({"a": ["b"], "b": ["a"], "c": ["c"], "d": ["a", "zz"]}) == [["a", "b"], ["c"]]


def test_freshness_without_budget_warns(tmp_path: Path) -> None:
    text = ADAPTER + REPLICATION + "[pipeline.raw.schedule]\nfreshness = true\n"
    assert codes(validate_config(load(tmp_path, text))) == [
        ("warning", "V016", "pipeline.raw.schedule.freshness")
    ]
    assert validate_config(load(tmp_path, text + "[freshness]\nexpected_lag_seconds = 3600\n")) == []


def test_template_placeholders(tmp_path: Path) -> None:
    text = ADAPTER + REPLICATION.replace("stg__{tenant}__{regions}", "stg__{tenant}__{region}")
    [msg] = validate_config(load(tmp_path, text))
    assert (msg.code, msg.field) == ("V017", "pipeline.raw.target.schema_template")
    assert msg.message == (
        "pipeline 'raw': target.schema_template uses {region}, which is not a source schema_pattern "
        "component; "
        "components: tenant, regions"
    )
    text = ADAPTER + REPLICATION.replace('["tenant", "regions..."]', '["regions...", "tenant"]')
    assert [m.code for m in validate_config(load(tmp_path, text))] == ["V017"]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ('backend = "gcs"', [("error", "V018", "state.backend")]),
        ('backend = "s3"', [("error", "V018", "state.s3_bucket")]),
        ('backend = "valkey"', [("error", "V018", "state.valkey_url")]),
        ('backend = "tiered"\ns3_bucket = "b"', [("error", "V018", "state.valkey_url")]),
        ('backend = "s3"\ns3_bucket = "b"', []),
    ],
)
def test_state_backend(tmp_path: Path, state: str, expected: list[tuple[str, str, str]]) -> None:
    text = ADAPTER + '[pipeline.t]\ntype = "transformation"\n[state]\n' + state + "\n"
    assert codes(validate_config(load(tmp_path, text))) == expected


def test_connector_manifest_missing(tmp_path: Path) -> None:
    text = (
        ADAPTER + '[connector.c]\nmanifest = "conn/connector.toml"\noutput_uri = "file://./x"\n'
        'target = { catalog = "c", schema = "s", table = "t" }\n'
    )
    [msg] = validate_config(load(tmp_path, text))
    assert (msg.code, msg.field) == ("V019", "connector.c.manifest")
    (tmp_path / "conn").mkdir()
    manifest = tmp_path / "conn" / "connector.toml"
    manifest.write_text("protocol_version = 0\n")  # found, but not a manifest the load would accept
    [msg] = validate_config(load(tmp_path, text))
    assert (msg.code, msg.field) == ("V019", "connector.c.manifest")
    assert msg.message.startswith(f"connector 'c': {manifest}: name: missing required key 'name'")
    manifest.write_text(
        'protocol_version = 0\nname = "c"\ncommand = ["./main.py"]\nstate_schema_version = 1\n'
        "egress_hosts = []\n"
    )
    assert validate_config(load(tmp_path, text)) == []


def test_hook_warning_becomes_v012(tmp_path: Path) -> None:
    text = ADAPTER + '[pipeline.t]\ntype = "transformation"\n[[hook.on_whatever]]\ncommand = "x"\n'
    [msg] = validate_config(load(tmp_path, text))
    assert (msg.severity, msg.code, msg.field) == ("warning", "V012", "hook.on_whatever")


# --- models ---------------------------------------------------------------------------------------------


def models_project(tmp_path: Path, files: dict[str, str], models: str = "models/**") -> RockyConfig:
    for name, body in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return load(tmp_path, ADAPTER + f'[pipeline.t]\ntype = "transformation"\nmodels = "{models}"\n')


def test_models_loaded_and_counted(tmp_path: Path) -> None:
    cfg = models_project(
        tmp_path,
        {"models/a.sql": "SELECT 1 AS x", "models/b.sql": "SELECT x FROM a", "models/c.sql": "SELECT 2"},
    )
    assert validate_models(cfg) == ([], 3)


def test_models_dir_missing(tmp_path: Path) -> None:
    cfg = models_project(tmp_path, {}, models="sql/**")
    msgs, count = validate_models(cfg)
    assert count == 0
    assert codes(msgs) == [("error", "V003", "pipeline.t.models")]
    assert msgs[0].message == (
        f"models directory {tmp_path / 'sql'} of pipeline 't' (models = \"sql/**\") does not exist; "
        "create it or fix models"
    )


def test_model_cycle(tmp_path: Path) -> None:
    cfg = models_project(tmp_path, {"models/a.sql": "SELECT * FROM b", "models/b.sql": "SELECT * FROM a"})
    msgs, _ = validate_models(cfg)
    assert codes(msgs) == [("error", "V004", "pipeline.t.models")]
    assert msgs[0].message.startswith("circular dependency detected involving: ")


def test_model_unknown_dependency(tmp_path: Path) -> None:
    cfg = models_project(
        tmp_path,
        {
            "models/a.sql": "SELECT 1",
            "models/a.toml": 'depends_on = ["orderz"]\n',
            "models/orders.sql": "SELECT 2",
        },
    )
    msgs, _ = validate_models(cfg)
    assert codes(msgs) == [("error", "V005", "pipeline.t.models")]
    assert msgs[0].message.startswith("unknown dependency 'orderz' referenced by 'a'")


def test_model_other_error(tmp_path: Path) -> None:
    cfg = models_project(tmp_path, {"models/a.sql": "SELECT 1", "models/a.toml": "name = \n"})
    msgs, _ = validate_models(cfg)
    assert [m.code for m in msgs] == ["V013"]


def freshness_project(tmp_path: Path, sidecar: str | None, extra: str = "") -> RockyConfig:
    files = {"models/a.sql": "SELECT 1 AS x", "models/b.sql": "SELECT x FROM a"}
    if sidecar is not None:
        files["models/b.toml"] = sidecar
    for name, body in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return load(
        tmp_path,
        ADAPTER + '[pipeline.t]\ntype = "transformation"\n[pipeline.t.schedule]\nfreshness = true\n' + extra,
    )


def test_transformation_freshness_without_any_budget_warns_v016(tmp_path: Path) -> None:
    cfg = freshness_project(tmp_path, None)
    assert validate_config(cfg) == []  # the budget may come from the models: loading them decides
    msgs, count = validate_models(cfg)
    assert count == 2
    assert codes(msgs) == [("warning", "V016", "pipeline.t.schedule.freshness")]
    assert msgs[0].message == (
        "pipeline 't' has freshness = true but no budget: no model sets freshness.max_lag_seconds and "
        "[freshness] expected_lag_seconds is not set, so it never becomes due; set one of them"
    )
    result = run_validation(tmp_path / "rocky.toml", env={})
    assert result.valid and [(m.code, m.field) for m in result.messages] == [
        ("V016", "pipeline.t.schedule.freshness")
    ]


def test_transformation_freshness_budget_from_a_model_or_the_default(tmp_path: Path) -> None:
    assert validate_models(freshness_project(tmp_path, "freshness = { max_lag_seconds = 3600 }\n")) == ([], 2)
    assert validate_models(
        freshness_project(tmp_path, None, "[freshness]\nexpected_lag_seconds = 600\n")
    ) == ([], 2)


def test_transformation_freshness_with_broken_models_reports_only_the_load_error(tmp_path: Path) -> None:
    cfg = freshness_project(tmp_path, "name = \n")
    msgs, _ = validate_models(cfg)
    assert [m.code for m in msgs] == ["V013"]


# --- result ---------------------------------------------------------------------------------------------


def test_result_json_always_has_lists(tmp_path: Path) -> None:
    result = run_validation(tmp_path / "missing.toml", env={})
    doc = json.loads(to_json(result))
    assert doc == {
        "version": doc["version"],
        "command": "validate",
        "valid": False,
        "messages": [
            {
                "severity": "error",
                "code": "V001",
                "message": f"config file not found: {tmp_path / 'missing.toml'}; "
                "create it or pass -c/--config PATH",
            }
        ],
        "adapters": [],
        "pipelines": [],
        "models": {"count": 0, "found": False, "dag_valid": True},
    }
    assert result.exit_code() == 1


def test_result_rendering() -> None:
    ok = ValidateOutput(valid=True, adapters=[AdapterSummary(name="default", adapter_type="duckdb")],
                        models=ModelsSummary(count=2, found=True))
    assert ok.exit_code() == 0
    assert ok.render_table() == "✓ config valid: 1 adapter(s), 0 pipeline(s), 2 model(s)\n"
    warn = ValidationMessage(severity="warning", code="V012", message="w", field="hook.on_x")
    bad = ValidateOutput(
        valid=False, messages=[ValidationMessage(severity="error", code="V006", message="m", field="f"), warn]
    )
    assert bad.render_table() == (
        "✗ config invalid (1 error, 1 warning)\n  error   V006 [f]: m\n  warning V012 [hook.on_x]: w\n"
    )
    assert "| error | V006 | f | m |" in bad.render_md()
    assert ok.render_md() == "**config valid**\n"
