"""Unknown keys in lenient tables load (ignored) but become warnings naming key, table and valid keys;
strict tables keep rejecting them (CONTRACT section 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.config import (
    DuckDbAdapterConfig,
    QualityPipeline,
    RockyConfig,
    TransformationPipeline,
    load_config,
)
from rocky_engine.config.validation import validate_config
from rocky_engine.errors import ConfigError

REPLICATION = """
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
[pipeline.raw.source]
schema_pattern = { prefix = "src__", components = ["tenant"], seperator = "__" }
adaptor = "default"
[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}"
[pipeline.raw.target.governance]
auto_create_schema = false
"""


def load(tmp_path: Path, text: str) -> RockyConfig:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={})


def test_misspelled_duckdb_path_is_in_memory_and_says_so(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[adapter.default]\ntype = "duckdb"\npth = "x.duckdb"\n')
    adapter = cfg.adapter("default")
    assert isinstance(adapter, DuckDbAdapterConfig) and adapter.in_memory
    assert cfg.warnings == [
        "unknown key 'pth' in [adapter.default] is ignored; did you mean 'path'? valid keys: path, retry, "
        "type (without 'path' this adapter is an in-memory database, discarded when rocky exits)"
    ]


def test_bare_adapter_shorthand_names_the_table_as_written(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\npaht = "x"\n')
    # With a path set, the typo changes nothing visible: no in-memory note.
    assert cfg.warnings == [
        "unknown key 'paht' in [adapter] is ignored; did you mean 'path'? valid keys: path, retry, type"
    ]


def test_deliberately_in_memory_duckdb_has_no_warning(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[adapter.default]\ntype = "duckdb"\n')
    assert cfg.warnings == []


def test_postgres_and_retry_typos(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[adapter.pg]\ntype = "postgres"\nhots = "db"\n[adapter.pg.retry]\nmax_retry = 5\n',
    )
    assert cfg.warnings == [
        "unknown key 'hots' in [adapter.pg] is ignored; did you mean 'host'? valid keys: dbname, dsn, host, "
        "password, port, retry, type, user",
        "unknown key 'max_retry' in [adapter.pg.retry] is ignored; did you mean 'max_retries'? valid keys: "
        "backoff_multiplier, circuit_breaker_recovery_timeout_secs, circuit_breaker_threshold, "
        "initial_backoff_ms, jitter, max_backoff_ms, max_retries",
    ]


def test_misspelled_models_glob_keeps_the_default_and_warns(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[pipeline.marts]\ntype = "transformation"\nmodles = "sql/**"\n')
    pipeline = cfg.pipeline("marts")
    assert isinstance(pipeline, TransformationPipeline) and pipeline.models == "models/**"
    assert cfg.warnings == [
        "unknown key 'modles' in [pipeline.marts] is ignored; did you mean 'models'? valid keys: "
        "atomic_merges, checks, depends_on, execution, models, schedule, target, type"
    ]


def test_nested_source_and_target_typos_name_their_table(tmp_path: Path) -> None:
    cfg = load(tmp_path, REPLICATION)
    assert cfg.warnings == [
        "unknown key 'adaptor' in [pipeline.raw.source] is ignored; did you mean 'adapter'? valid keys: "
        "adapter, catalog, discovery, parallel_reads, schema_pattern, split_column",
        "unknown key 'seperator' in [pipeline.raw.source.schema_pattern] is ignored; did you mean "
        "'separator'? valid keys: components, prefix, separator",
        "unknown key 'auto_create_schema' in [pipeline.raw.target.governance] is ignored; did you mean "
        "'auto_create_schemas'? valid keys: auto_create_schemas",
    ]


def test_array_table_items_are_named_with_their_index(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[pipeline.dq]\ntype = "quality"\n[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "s"\n'
        '[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "s"\ntabel = "t"\n'
        "[pipeline.dq.checks]\nrow_count = true\n",
    )
    assert cfg.warnings == [
        "unknown key 'tabel' in [pipeline.dq.tables[1]] is ignored; did you mean 'table'? valid keys: "
        "catalog, schema, table"
    ]
    [msg] = [m for m in validate_config(cfg) if m.code == "V012"]
    assert (msg.severity, msg.code, msg.field) == ("warning", "V012", "pipeline.dq.tables[1].tabel")


def test_hook_typos_warn_without_a_suggestion_when_nothing_is_close(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[[hook.on_pipeline_error]]\ncommand = "true"\ntimout_ms = 5\n'
        '[hook.webhooks.on_pipeline_error]\nurl = "http://127.0.0.1:1/"\nchannel = "#x"\n',
    )
    assert cfg.warnings == [
        "unknown key 'timout_ms' in [hook.on_pipeline_error[0]] is ignored; did you mean 'timeout_ms'? "
        "valid keys: command, env, on_failure, timeout_ms",
        "unknown key 'channel' in [hook.webhooks.on_pipeline_error] is ignored; valid keys: body_template, "
        "headers, method, preset, retry_count, retry_delay_ms, secret, timeout_ms, url",
    ]
    fields = [m.field for m in validate_config(cfg) if m.code == "V012"]
    assert fields == ["hook.on_pipeline_error[0].timout_ms", "hook.webhooks.on_pipeline_error.channel"]


def test_free_form_tables_are_not_walked(tmp_path: Path) -> None:
    # `env` and `headers` hold the user's own names; they are values, not config keys.
    cfg = load(
        tmp_path,
        '[[hook.on_pipeline_error]]\ncommand = "true"\nenv = { ANYTHING = "1" }\n'
        '[hook.webhooks.on_pipeline_error]\nurl = "http://x/"\nheaders = { X-Custom = "1" }\n',
    )
    assert cfg.warnings == []


def test_strict_tables_still_refuse_unknown_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'concurency' in \[pipeline.m.execution\]"):
        load(tmp_path, '[pipeline.m]\ntype = "transformation"\n[pipeline.m.execution]\nconcurency = 2\n')


def test_transformation_target_takes_governance(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[pipeline.m]\ntype = "transformation"\n[pipeline.m.target]\nadapter = "default"\n'
        "[pipeline.m.target.governance]\nauto_create_schemas = false\n",
    )
    pipeline = cfg.pipeline("m")
    assert isinstance(pipeline, TransformationPipeline)
    assert pipeline.target.governance.auto_create_schemas is False
    assert cfg.warnings == []


def test_quality_timestamp_column_defaults_to_none(tmp_path: Path) -> None:
    base = '[pipeline.dq]\ntype = "quality"\n{extra}[[pipeline.dq.tables]]\ncatalog = "wh"\nschema = "s"\n'
    checks = "[pipeline.dq.checks]\nrow_count = true\n"
    default = load(tmp_path, base.format(extra="") + checks).pipeline("dq")
    assert isinstance(default, QualityPipeline) and default.timestamp_column is None
    named = load(tmp_path, base.format(extra='timestamp_column = "loaded_at"\n') + checks).pipeline("dq")
    assert isinstance(named, QualityPipeline) and named.timestamp_column == "loaded_at"
