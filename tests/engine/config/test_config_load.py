"""load_config: files, TOML syntax, shorthands and aliases, strict tables, exact error messages."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from rocky_engine.config import (
    DuckDbAdapterConfig,
    ReplicationPipeline,
    RockyConfig,
    TransformationPipeline,
    load_config,
)
from rocky_engine.errors import ConfigError

ADAPTER = """
[adapter]
type = "duckdb"
path = "wh.duckdb"
"""

REPLICATION = """
[pipeline.orders]
[pipeline.orders.source]
schema_pattern = { prefix = "src__", components = ["tenant"] }
[pipeline.orders.target]
catalog_template = "wh"
schema_template = "stg__{tenant}"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> RockyConfig:
    return load_config(write(tmp_path, text), env={})


def error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return info.value


# --- the file ---------------------------------------------------------------------------------------------


def test_missing_file_names_path_and_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env={})
    assert str(info.value) == f"config file not found: {missing}; create it or pass -c/--config PATH"


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a directory; pass the rocky\.toml file itself"):
        load_config(tmp_path, env={})


def test_malformed_toml_reports_line_and_column(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter]\ntype "duckdb"\n')
    path = tmp_path / "rocky.toml"
    assert str(exc).startswith(f"{path}: invalid TOML: ")
    assert "(at line 2, column 6)" in str(exc)
    assert str(exc).endswith("; fix the syntax at that line and column")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "rocky.toml"
    path.write_bytes(b"x = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, env={})


def test_path_root_and_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ADAPTER + 'x_hash_input = "${WHO}"\n'
    write(tmp_path, text)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(Path("rocky.toml"), env={"WHO": "me"})
    assert cfg.path == tmp_path / "rocky.toml"
    assert cfg.path.is_absolute()
    assert cfg.root == tmp_path
    substituted = text.replace("${WHO}", "me")
    assert cfg.config_hash == hashlib.sha256(substituted.encode()).hexdigest()


def test_empty_file_loads_with_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, "")
    assert cfg.adapters == {} and cfg.pipelines == {} and cfg.connectors == {}
    assert cfg.schedule.timezone == "UTC"
    assert cfg.freshness.expected_lag_seconds is None
    assert cfg.state.backend == "local"
    assert cfg.hook.commands == {} and cfg.hook.webhooks == {}


# --- shorthands and aliases -----------------------------------------------------------------------------


def test_bare_adapter_means_default(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + "[adapter.retry]\nmax_retries = 7\n")
    adapter = cfg.adapter("default")
    assert isinstance(adapter, DuckDbAdapterConfig)
    assert adapter.retry.max_retries == 7


def test_bare_pipeline_means_default(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + '[pipeline]\ntype = "transformation"\nmodels = "sql/**"\n')
    assert list(cfg.pipelines) == ["default"]
    p = cfg.pipeline("default")
    assert isinstance(p, TransformationPipeline) and p.models == "sql/**"


def test_bare_pipeline_without_type_is_replication(tmp_path: Path) -> None:
    text = ADAPTER + REPLICATION.replace("pipeline.orders", "pipeline").replace("[pipeline]\n", "")
    cfg = load(tmp_path, text)
    assert isinstance(cfg.pipeline("default"), ReplicationPipeline)


def test_plural_aliases_merge_with_singular(tmp_path: Path) -> None:
    text = (
        ADAPTER
        + '[adapters.pg]\ntype = "postgres"\ndbname = "app"\n'
        + REPLICATION
        + '[pipelines.models]\ntype = "transformation"\n'
    )
    cfg = load(tmp_path, text)
    assert list(cfg.adapters) == ["default", "pg"]
    assert list(cfg.pipelines) == ["orders", "models"]


def test_name_defined_twice_is_an_error(tmp_path: Path) -> None:
    text = '[pipeline.t]\ntype = "transformation"\n[pipelines.t]\ntype = "transformation"\n'
    exc = error(tmp_path, text)
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: pipelines.t: pipeline 't' is defined twice "
        "([pipeline.t] and [pipelines.t]); keep one definition"
    )


def test_shorthand_and_named_default_clash(tmp_path: Path) -> None:
    exc = error(tmp_path, ADAPTER + '[adapters.default]\ntype = "duckdb"\n')
    assert "adapter 'default' is defined twice ([adapter] and [adapters.default])" in str(exc)


def test_shorthand_mixed_with_named_tables_is_an_error(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter.pg]\ntype = "postgres"\n' + ADAPTER)
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: adapter: [adapter] mixes an unnamed adapter (the shorthand with `type`) "
        "with named ones ([adapter.pg]); rename the unnamed one to [adapter.default]"
    )


def test_invalid_pipeline_name(tmp_path: Path) -> None:
    exc = error(tmp_path, '[pipeline."a b"]\ntype = "transformation"\n')
    assert "pipeline name 'a b' is invalid; use letters, digits" in str(exc)


def test_named_entry_must_be_a_table(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapters]\ndefault = "duckdb"\n')
    assert "[adapters.default] must be a table" in str(exc)


# --- types ----------------------------------------------------------------------------------------------


def test_unknown_pipeline_type_names_pipeline_and_valid_types(tmp_path: Path) -> None:
    exc = error(tmp_path, '[pipeline.orders]\ntype = "replicate"\n')
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: pipeline.orders.type: unknown pipeline type 'replicate' for pipeline "
        "'orders'; valid types: replication, transformation, quality, snapshot, load"
    )


def test_unknown_adapter_type_lists_valid_types(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter.wh]\ntype = "snowflake"\n')
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: adapter.wh.type: unknown adapter type 'snowflake' for adapter 'wh'; "
        "valid types: duckdb, postgres, spark, fivetran"
    )


def test_bigquery_adapter_is_refused_with_reason(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter.bq]\ntype = "bigquery"\n')
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: adapter.bq.type: BigQuery is not supported: it does not accept local "
        "Parquet files (adapter 'bq'); use one of: duckdb, postgres, spark, fivetran"
    )


def test_adapter_without_type(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter.wh]\npath = "x.duckdb"\n')
    assert (
        "missing required key 'type' in [adapter.wh]; valid types: duckdb, postgres, spark, fivetran"
        in str(exc)
    )


@pytest.mark.parametrize(
    ("snippet", "key", "fragment"),
    [
        (
            REPLICATION.replace("[pipeline.orders]\n", '[pipeline.orders]\nstrategy = "fast"\n'),
            "pipeline.orders.strategy",
            "invalid value 'fast': input should be 'incremental', 'full_refresh' or 'merge'",
        ),
        (
            '[state]\nbackend = "ftp"\n',
            "state.backend",
            "invalid value 'ftp': input should be 'local', 's3', 'valkey', 'tiered' or 'gcs'",
        ),
        (
            '[state]\non_upload_failure = "retry"\n',
            "state.on_upload_failure",
            "invalid value 'retry': input should be 'skip' or 'fail'",
        ),
        (
            '[state.idempotency]\ndedup_on = "all"\n',
            "state.idempotency.dedup_on",
            "invalid value 'all': input should be 'success' or 'any'",
        ),
        (
            '[pipeline.t]\ntype = "transformation"\n[pipeline.t.schedule]\ncatchup = "all"\n',
            "pipeline.t.schedule.catchup",
            "invalid value 'all': input should be 'latest' or 'skip'",
        ),
        (
            '[pipeline.t]\ntype = "transformation"\n[pipeline.t.execution]\nconcurrency = 0\n',
            "pipeline.t.execution.concurrency",
            'concurrency must be a positive integer or "adaptive" (got 0)',
        ),
        (
            '[pipeline.t]\ntype = "transformation"\n[pipeline.t.execution]\nconcurrency = "fast"\n',
            "pipeline.t.execution.concurrency",
            "concurrency must be a positive integer or \"adaptive\" (got 'fast')",
        ),
        (
            '[pipeline.t]\ntype = "transformation"\n[pipeline.t.execution]\nconcurrency = true\n',
            "pipeline.t.execution.concurrency",
            'concurrency must be a positive integer or "adaptive" (got true)',
        ),
        (
            '[pipeline.l]\ntype = "load"\nsource_dir = "d"\nformat = "xml"\n'
            'target = { catalog = "c", schema = "s" }\n',
            "pipeline.l.format",
            "invalid value 'xml': input should be 'csv', 'parquet' or 'jsonl'",
        ),
    ],
)
def test_bad_values_name_key_and_choices(tmp_path: Path, snippet: str, key: str, fragment: str) -> None:
    exc = error(tmp_path, ADAPTER + snippet)
    assert exc.key == key
    assert fragment in str(exc)
    assert str(exc).startswith(f"{tmp_path / 'rocky.toml'}: {key}: ")


def test_adaptive_concurrency(tmp_path: Path) -> None:
    cfg = load(
        tmp_path, '[pipeline.t]\ntype = "transformation"\n[pipeline.t.execution]\nconcurrency = "adaptive"\n'
    )
    assert cfg.pipeline("t").execution.concurrency == "adaptive"


def test_merge_needs_merge_keys(tmp_path: Path) -> None:
    text = ADAPTER + REPLICATION.replace("[pipeline.orders]\n", '[pipeline.orders]\nstrategy = "merge"\n')
    exc = error(tmp_path, text)
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: pipeline.orders: "
        "strategy 'merge' needs merge_keys (a list of key columns)"
    )


def test_missing_required_key(tmp_path: Path) -> None:
    exc = error(tmp_path, '[pipeline.orders]\n[pipeline.orders.target]\ncatalog_template = "x"\n')
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: pipeline.orders.source: missing required key 'source' in "
        "[pipeline.orders]; add it"
    )


def test_quality_requires_checks(tmp_path: Path) -> None:
    exc = error(tmp_path, '[pipeline.q]\ntype = "quality"\ntables = [{ catalog = "c", schema = "s" }]\n')
    assert exc.key == "pipeline.q.checks"
    assert "missing required key 'checks' in [pipeline.q]" in str(exc)


# --- strict tables --------------------------------------------------------------------------------------

TRANSFORM = '[pipeline.t]\ntype = "transformation"\n'
CONNECTOR = (
    '[connector.c]\nmanifest = "m.toml"\noutput_uri = "file://./land"\n'
    'target = { catalog = "raw", schema = "s", table = "t" }\n'
)


@pytest.mark.parametrize(
    ("text", "section", "key", "valid_start"),
    [
        ("[state]\nbakend = 's3'\n", "state", "bakend", "backend, s3_bucket, s3_prefix"),
        (
            "[state.idempotency]\nretention = 3\n",
            "state.idempotency",
            "retention",
            "retention_days, dedup_on",
        ),
        ("[schedule]\ntz = 'UTC'\n", "schedule", "tz", "timezone"),
        (
            TRANSFORM + "[pipeline.t.schedule]\ncrn = '* * * * *'\n",
            "pipeline.t.schedule",
            "crn",
            "cron, timezone",
        ),
        (
            TRANSFORM + "[pipeline.t.schedule.retry]\nmax_retries = 2\n",
            "pipeline.t.schedule.retry",
            "max_retries",
            "max",
        ),
        (
            TRANSFORM + "[pipeline.t.checks]\nrowcount = true\n",
            "pipeline.t.checks",
            "rowcount",
            "enabled, row_count",
        ),
        (
            TRANSFORM + "[pipeline.t.checks.freshness]\nthreshold = 5\n",
            "pipeline.t.checks.freshness",
            "threshold",
            "threshold_seconds, severity",
        ),
        (
            TRANSFORM
            + "[[pipeline.t.checks.assertions]]\ntable = 'x'\ntype = 'not_null'\ncolumn = 'a'\ncolum = 'b'\n",
            "pipeline.t.checks.assertions[0]",
            "colum",
            "table, type, column",
        ),
        (
            TRANSFORM + "[pipeline.t.execution]\nconcurency = 3\n",
            "pipeline.t.execution",
            "concurency",
            "concurrency, fail_fast, error_rate_abort_pct, table_retries",
        ),
        (CONNECTOR + "retry = 2\n", "connector.c", "retry", "manifest, output_uri, secrets, target, retries"),
        (
            CONNECTOR + "[connector.c.limits]\nwall_time = 5\n",
            "connector.c.limits",
            "wall_time",
            "wall_time_secs, cpu_time_secs, memory_bytes, output_bytes",
        ),
        (
            CONNECTOR.replace('table = "t" }', 'table = "t", tabel = "u" }'),
            "connector.c.target",
            "tabel",
            "adapter, catalog, schema, table",
        ),
    ],
)
def test_unknown_key_in_strict_table(
    tmp_path: Path, text: str, section: str, key: str, valid_start: str
) -> None:
    exc = error(tmp_path, ADAPTER + text)
    assert exc.key == f"{section}.{key}"
    assert str(exc).startswith(
        f"{tmp_path / 'rocky.toml'}: {section}.{key}: unknown key '{key}' in [{section}]; "
        f"valid keys: {valid_start}"
    )
    assert str(exc).endswith("; fix the spelling or remove the key")


def test_execution_unknown_key_exact_message(tmp_path: Path) -> None:
    exc = error(tmp_path, ADAPTER + REPLICATION + "[pipeline.orders.execution]\nconcurency = 3\n")
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: pipeline.orders.execution.concurency: unknown key 'concurency' in "
        "[pipeline.orders.execution]; valid keys: concurrency, fail_fast, error_rate_abort_pct, "
        "table_retries; "
        "fix the spelling or remove the key"
    )


def test_lenient_tables_load_without_extra_keys_but_warn(tmp_path: Path) -> None:
    text = (
        ADAPTER.replace('path = "wh.duckdb"', 'path = "wh.duckdb"\nthreads = 4')
        + REPLICATION.replace("[pipeline.orders]\n", "[pipeline.orders]\nowner = 'data'\n")
        + "[freshness]\nexpected_lag_seconds = 60\nnote = 'x'\n"
    )
    cfg = load(tmp_path, text)
    assert cfg.freshness.expected_lag_seconds == 60
    assert cfg.warnings == [
        "unknown key 'threads' in [adapter] is ignored; valid keys: path, retry, type",
        "unknown key 'owner' in [pipeline.orders] is ignored; valid keys: atomic_merges, checks, depends_on, "
        "excluded_tables, execution, merge_keys, metadata_columns, schedule, source, strategy, target, "
        "timestamp_column, type",
        "unknown key 'note' in [freshness] is ignored; valid keys: expected_lag_seconds",
    ]


def test_unknown_top_level_table_is_a_warning(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + "[hooks.on_pipeline_start]\ncommand = 'x'\n[budget]\nmax = 1\n")
    assert cfg.warnings == [
        "unknown top-level key 'hooks' in rocky.toml ignored (did you mean [hook]?)",
        "unknown top-level key 'budget' in rocky.toml ignored",
    ]


# --- helpers --------------------------------------------------------------------------------------------


def test_pipeline_and_adapter_lookup_errors_list_names(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + REPLICATION + TRANSFORM)
    with pytest.raises(ConfigError) as info:
        cfg.pipeline("nope")
    assert str(info.value) == (
        f"{tmp_path / 'rocky.toml'}: unknown pipeline 'nope'; available pipelines: orders, t; "
        "pass one of those names or add a [pipeline.<name>] table"
    )
    with pytest.raises(ConfigError, match="unknown adapter 'pg'; available adapters: default"):
        cfg.adapter("pg")
    with pytest.raises(ConfigError, match=r"unknown connector 'c'; available connectors: \(none defined\)"):
        cfg.connector("c")


def test_pipeline_timezone_falls_back_to_project(tmp_path: Path) -> None:
    text = (
        '[schedule]\ntimezone = "Europe/Lisbon"\n'
        + TRANSFORM
        + "[pipeline.t.schedule]\ncron = '0 3 * * *'\n"
        + '[pipeline.u]\ntype = "transformation"\n[pipeline.u.schedule]\ntimezone = "Asia/Tokyo"\n'
    )
    cfg = load(tmp_path, text)
    assert cfg.pipeline_timezone("t") == "Europe/Lisbon"
    assert cfg.pipeline_timezone("u") == "Asia/Tokyo"


def test_rocky_config_model_validate_defaults_pipeline_type() -> None:
    cfg = RockyConfig.model_validate(
        {
            "path": Path("/p/rocky.toml"),
            "root": Path("/p"),
            "config_hash": "h",
            "adapters": {"default": {"type": "duckdb"}},
            "pipelines": {
                "raw": {
                    "source": {"schema_pattern": {"components": ["tenant"]}},
                    "target": {"catalog_template": "wh", "schema_template": "{tenant}"},
                },
                "t": {"type": "transformation"},
            },
        }
    )
    assert isinstance(cfg.pipeline("raw"), ReplicationPipeline)
    assert isinstance(cfg.pipeline("t"), TransformationPipeline)
    again = RockyConfig.model_validate(cfg.model_dump())
    assert again.pipelines == cfg.pipelines


def test_other_hook_keys_warn(tmp_path: Path) -> None:
    cfg = load(tmp_path, "[hook]\ntimeout = 5\n")
    assert cfg.warnings == ["unknown key 'timeout' in [hook] ignored; hook keys are on_<event> and webhooks"]
