"""Typed models: adapters and secrets, the five pipeline types, checks and assertions, state, schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.config import (
    DuckDbAdapterConfig,
    FivetranAdapterConfig,
    LoadPipeline,
    PostgresAdapterConfig,
    QualityPipeline,
    ReplicationPipeline,
    RockyConfig,
    SnapshotPipeline,
    TransformationPipeline,
    load_config,
)
from rocky_engine.errors import ConfigError


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> RockyConfig:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env=env or {})


def error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return info.value


# --- adapters -------------------------------------------------------------------------------------------


def test_duckdb_catalog_and_paths(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[adapter.a]\ntype = "duckdb"\npath = "data/poc.duckdb"\n'
        '[adapter.b]\ntype = "duckdb"\n'
        '[adapter.c]\ntype = "duckdb"\npath = "/abs/x.db"\n',
    )
    a, b, c = (cfg.adapter(n) for n in "abc")
    assert isinstance(a, DuckDbAdapterConfig) and isinstance(b, DuckDbAdapterConfig)
    assert isinstance(c, DuckDbAdapterConfig)
    assert a.catalog == "poc" and a.resolved_path(cfg.root) == tmp_path / "data" / "poc.duckdb"
    assert b.catalog == "memory" and b.resolved_path(cfg.root) is None
    assert c.catalog == "x" and c.resolved_path(cfg.root) == Path("/abs/x.db")


def test_retry_defaults(tmp_path: Path) -> None:
    retry = load(tmp_path, '[adapter]\ntype = "duckdb"\n').adapter("default").retry
    assert (retry.max_retries, retry.initial_backoff_ms, retry.max_backoff_ms) == (3, 1000, 30000)
    assert retry.backoff_multiplier == 2.0 and retry.jitter is True
    assert retry.circuit_breaker_threshold == 5 and retry.circuit_breaker_recovery_timeout_secs is None


def test_postgres_fields_conninfo_and_catalog(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[adapter]\ntype = "postgres"\nhost = "127.0.0.1"\nport = 5433\nuser = "rocky"\n'
        'password = "${PGPW}"\ndbname = "analytics"\n',
        env={"PGPW": "s3cret pass'word"},
    )
    pg = cfg.adapter("default")
    assert isinstance(pg, PostgresAdapterConfig)
    assert pg.catalog == "analytics"
    assert pg.conninfo() == (
        "host=127.0.0.1 port=5433 user=rocky password='s3cret pass\\'word' dbname=analytics"
    )


@pytest.mark.parametrize(
    ("dsn", "catalog"),
    [
        ("postgresql://u:pw@db:5432/warehouse?sslmode=disable", "warehouse"),
        ("postgres://u@db", "postgres"),
        ("host=db dbname='my db' password=x", "my db"),
        ("host=db dbname = shop", "shop"),
        ("host=db", "postgres"),
    ],
)
def test_postgres_catalog_from_dsn(tmp_path: Path, dsn: str, catalog: str) -> None:
    pg = load(tmp_path, f'[adapter]\ntype = "postgres"\ndsn = "{dsn}"\n').adapter("default")
    assert isinstance(pg, PostgresAdapterConfig)
    assert pg.catalog == catalog
    assert pg.conninfo() == dsn


def test_postgres_dsn_and_fields_conflict(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter]\ntype = "postgres"\ndsn = "host=a"\nhost = "b"\n')
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: adapter: set either dsn or host/port/user/password/dbname, not both"
    )


def test_fivetran_adapter(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[adapter.ft]\ntype = "fivetran"\nkind = "discovery"\napi_key = "k"\napi_secret = "s"\n'
        'destination_id = "dest"\n',
    )
    ft = cfg.adapter("ft")
    assert isinstance(ft, FivetranAdapterConfig)
    assert ft.base_url == "https://api.fivetran.com"
    assert ft.api_key.get_secret_value() == "k"


def test_fivetran_missing_key(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter.ft]\ntype = "fivetran"\napi_key = "k"\napi_secret = "s"\n')
    assert exc.key == "adapter.ft.destination_id"
    assert "missing required key 'destination_id' in [adapter.ft]; add it" in str(exc)


def test_secrets_never_print(tmp_path: Path) -> None:
    secrets = {"PW": "hunter2-password", "KEY": "apikey-123456", "SEC": "apisecret-98765", "WH": "whsec-5555"}
    cfg = load(
        tmp_path,
        '[adapter.pg]\ntype = "postgres"\npassword = "${PW}"\n'
        '[adapter.pg2]\ntype = "postgres"\ndsn = "postgresql://u:${PW}@h/db"\n'
        '[adapter.ft]\ntype = "fivetran"\napi_key = "${KEY}"\napi_secret = "${SEC}"\ndestination_id = "d"\n'
        '[hook.webhooks.on_pipeline_error]\nurl = "http://127.0.0.1/x"\nsecret = "${WH}"\n',
        env=secrets,
    )
    rendered = [repr(cfg), str(cfg), cfg.model_dump_json(), str(cfg.model_dump())]
    for text in rendered:
        for value in secrets.values():
            assert value not in text
    assert "**********" in cfg.model_dump_json()


def test_secret_value_not_echoed_in_errors(tmp_path: Path) -> None:
    exc = error(tmp_path, '[adapter]\ntype = "postgres"\npassword = 123456789\n')
    assert exc.key == "adapter.password"
    assert "123456789" not in str(exc)


# --- pipelines ------------------------------------------------------------------------------------------


def test_replication_defaults_and_fields(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
[pipeline.raw]
strategy = "merge"
merge_keys = ["id"]
metadata_columns = [{ name = "_loaded_by", type = "VARCHAR", value = "'rocky'" }]
depends_on = "other"
[pipeline.raw.source]
catalog = "src"
[pipeline.raw.source.schema_pattern]
prefix = "src__"
components = ["tenant", "regions..."]
[pipeline.raw.source.discovery]
adapter = "ft"
[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}"
[pipeline.raw.target.governance]
auto_create_schemas = false
""",
    )
    p = cfg.pipeline("raw")
    assert isinstance(p, ReplicationPipeline)
    assert p.type == "replication" and p.strategy == "merge" and p.merge_keys == ["id"]
    assert p.timestamp_column == "_fivetran_synced"
    assert p.metadata_columns[0].value == "'rocky'"
    assert p.depends_on == ["other"]
    assert p.source.adapter == "default" and p.source.catalog == "src"
    assert p.source.schema_pattern.separator == "__"
    assert p.source.schema_pattern.components == ["tenant", "regions..."]
    assert p.source.discovery is not None and p.source.discovery.adapter == "ft"
    assert p.target.separator == "__" and p.target.governance.auto_create_schemas is False
    assert p.execution.concurrency == 4 and p.execution.fail_fast is False
    assert p.execution.error_rate_abort_pct == 50 and p.execution.table_retries == 1
    assert p.checks.enabled is True and p.schedule is None and p.excluded_tables == []


def test_transformation_defaults(tmp_path: Path) -> None:
    p = load(tmp_path, '[pipeline.t]\ntype = "transformation"\n').pipeline("t")
    assert isinstance(p, TransformationPipeline)
    assert p.models == "models/**" and p.target.adapter == "default"


def test_quality_tables_schema_alias(tmp_path: Path) -> None:
    p = load(
        tmp_path,
        '[pipeline.q]\ntype = "quality"\n[[pipeline.q.tables]]\ncatalog = "wh"\nschema = "stg"\n'
        '[[pipeline.q.tables]]\ncatalog = "wh"\nschema = "mart"\ntable = "orders"\n'
        "[pipeline.q.checks]\nrow_count = true\n",
    ).pipeline("q")
    assert isinstance(p, QualityPipeline)
    assert [(t.catalog, t.schema_, t.table) for t in p.tables] == [
        ("wh", "stg", None),
        ("wh", "mart", "orders"),
    ]
    assert p.checks.row_count is True


def test_snapshot(tmp_path: Path) -> None:
    p = load(
        tmp_path,
        '[pipeline.s]\ntype = "snapshot"\nunique_key = "id"\nupdated_at = "updated_at"\n'
        'source = { catalog = "wh", schema = "raw", table = "customers" }\n'
        'target = { adapter = "pg", catalog = "wh", schema = "snap", table = "customers_history" }\n',
    ).pipeline("s")
    assert isinstance(p, SnapshotPipeline)
    assert p.unique_key == ["id"] and p.invalidate_hard_deletes is False
    assert p.source.full_name == "wh.raw.customers" and p.target.adapter == "pg"


def test_snapshot_needs_table(tmp_path: Path) -> None:
    exc = error(
        tmp_path,
        '[pipeline.s]\ntype = "snapshot"\nunique_key = ["id"]\nupdated_at = "u"\n'
        'source = { catalog = "wh", schema = "raw" }\n'
        'target = { catalog = "wh", schema = "snap", table = "t" }\n',
    )
    assert exc.key == "pipeline.s.source.table"
    assert "missing required key 'table' in [pipeline.s.source]" in str(exc)


def test_load_pipeline(tmp_path: Path) -> None:
    p = load(
        tmp_path,
        '[pipeline.l]\ntype = "load"\nsource_dir = "data"\n'
        '[pipeline.l.target]\ncatalog = "wh"\nschema = "raw"\n',
    ).pipeline("l")
    assert isinstance(p, LoadPipeline)
    assert p.format is None and p.target.table is None and p.target.schema_ == "raw"


def test_schedule_defaults_and_values(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[pipeline.t]\ntype = "transformation"\n[pipeline.t.schedule]\ncron = "0 3 * * *"\n'
        'after = ["raw"]\nretry = { max = 2 }\ntimeout_minutes = 30\n'
        '[pipeline.u]\ntype = "transformation"\n[pipeline.u.schedule]\n',
    )
    t = cfg.pipeline("t").schedule
    u = cfg.pipeline("u").schedule
    assert t is not None and u is not None
    assert t.cron == "0 3 * * *" and t.after == ["raw"] and t.retry.max == 2 and t.timeout_minutes == 30
    assert (u.cron, u.timezone, u.after, u.freshness, u.catchup) == (None, None, [], False, "latest")
    assert (u.retry.max, u.timeout_minutes, u.enabled) == (0, 0, True)


# --- checks ---------------------------------------------------------------------------------------------


def checks_config(tmp_path: Path, body: str) -> RockyConfig:
    return load(tmp_path, '[pipeline.t]\ntype = "transformation"\n[pipeline.t.checks]\n' + body)


def test_checks_defaults(tmp_path: Path) -> None:
    c = checks_config(tmp_path, "").pipeline("t").checks
    assert (c.enabled, c.row_count, c.column_match.enabled, c.fail_on_error) == (True, False, False, True)
    assert c.freshness is None and c.null_rate is None and c.custom == [] and c.assertions == []
    assert c.anomaly_threshold_pct == 50


def test_column_match_bool_or_table(tmp_path: Path) -> None:
    c = checks_config(tmp_path, "column_match = true\n").pipeline("t").checks
    assert c.column_match.enabled is True and c.column_match.severity == "error"
    c = (
        checks_config(tmp_path, 'column_match = { enabled = true, severity = "warning" }\n')
        .pipeline("t")
        .checks
    )
    assert c.column_match.severity == "warning"


def test_freshness_null_rate_custom(tmp_path: Path) -> None:
    c = (
        checks_config(
            tmp_path,
            "freshness = { threshold_seconds = 3600 }\n"
            'null_rate = { columns = ["a"], threshold = 0.1, severity = "error" }\n'
            'custom = [{ name = "neg", sql = "SELECT count(*) FROM {target} WHERE x < 0" }]\n',
        )
        .pipeline("t")
        .checks
    )
    assert c.freshness is not None and c.freshness.severity == "warning"
    assert c.null_rate is not None and c.null_rate.threshold == 0.1
    assert c.custom[0].threshold == 0 and c.custom[0].severity == "error"


def test_bad_severity(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        checks_config(tmp_path, 'column_match = { enabled = true, severity = "fatal" }\n')
    assert info.value.key == "pipeline.t.checks.column_match.severity"
    assert "invalid value 'fatal': input should be 'error' or 'warning'" in str(info.value)


def test_assertions_parse_and_normalize(tmp_path: Path) -> None:
    c = (
        checks_config(
            tmp_path,
            """
[[pipeline.t.checks.assertions]]
table = "orders"
type = "accepted_values"
column = "status"
values = ["open", "closed"]
[[pipeline.t.checks.assertions]]
table = "orders"
type = "aggregate"
column = "amount"
op = "sum"
cmp = "gte"
value = 0
severity = "warning"
[[pipeline.t.checks.assertions]]
table = "orders"
type = "row_count_range"
min = 1
[[pipeline.t.checks.assertions]]
table = "orders"
type = "aggregate"
op = "count"
cmp = ">"
value = 0
""",
        )
        .pipeline("t")
        .checks
    )
    a, b, rc, count = c.assertions
    assert (
        a.values == ["open", "closed"]
        and a.severity == "error"
        and a.display_name == "accepted_values:status"
    )
    assert b.cmp == ">=" and b.severity == "warning"
    assert rc.min == 1 and rc.max is None and rc.display_name == "row_count_range"
    assert count.column is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('type = "accepted_values"\ncolumn = "s"\n', "assertion type 'accepted_values' needs 'values'"),
        (
            'type = "accepted_values"\ncolumn = "s"\nvalues = []\n',
            "assertion type 'accepted_values' needs 'values'",
        ),
        ('type = "not_null"\n', "assertion type 'not_null' needs 'column'"),
        (
            'type = "relationships"\ncolumn = "c"\nto_table = "t"\n',
            "assertion type 'relationships' needs 'to_column'",
        ),
        ('type = "row_count_range"\n', "assertion type 'row_count_range' needs 'min' or 'max'"),
        (
            'type = "aggregate"\nop = "sum"\ncmp = "<"\nvalue = 1\n',
            "assertion type 'aggregate' with op 'sum' needs 'column'",
        ),
        ('type = "composite"\n', "assertion type 'composite' needs 'columns'"),
        ('type = "older_than_n_days"\ncolumn = "c"\n', "assertion type 'older_than_n_days' needs 'days'"),
        ('type = "regex_match"\ncolumn = "c"\n', "assertion type 'regex_match' needs 'pattern'"),
        ('type = "expression"\n', "assertion type 'expression' needs 'expression'"),
    ],
)
def test_assertion_required_keys(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        checks_config(tmp_path, '[[pipeline.t.checks.assertions]]\ntable = "orders"\n' + body)
    assert str(info.value) == f"{tmp_path / 'rocky.toml'}: pipeline.t.checks.assertions[0]: {message}"


def test_assertion_unknown_type_lists_types(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        checks_config(tmp_path, '[[pipeline.t.checks.assertions]]\ntable = "o"\ntype = "not_empty"\n')
    assert info.value.key == "pipeline.t.checks.assertions[0].type"
    assert "invalid value 'not_empty': input should be 'not_null', 'unique', 'accepted_values'" in str(
        info.value
    )


def test_assertion_bad_cmp(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        checks_config(
            tmp_path,
            '[[pipeline.t.checks.assertions]]\ntable = "o"\ntype = "aggregate"\n'
            'op = "count"\ncmp = "~"\nvalue = 1\n',
        )
    assert info.value.key == "pipeline.t.checks.assertions[0].cmp"


def test_threshold_refuses_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        checks_config(tmp_path, "anomaly_threshold_pct = true\n")
    assert str(info.value) == (
        f"{tmp_path / 'rocky.toml'}: pipeline.t.checks.anomaly_threshold_pct: "
        "invalid value true: expected a number"
    )


# --- state ----------------------------------------------------------------------------------------------


def test_state_defaults(tmp_path: Path) -> None:
    s = load(tmp_path, "").state
    assert (s.backend, s.s3_prefix, s.valkey_prefix, s.transfer_timeout_seconds) == (
        "local",
        "rocky/state/",
        "rocky:state:",
        300,
    )
    assert (s.on_upload_failure, s.concurrency_control, s.on_schema_mismatch) == ("skip", "off", "recreate")
    assert (s.idempotency.retention_days, s.idempotency.dedup_on, s.idempotency.in_flight_ttl_hours) == (
        30,
        "success",
        24,
    )


def test_state_gcs_parses(tmp_path: Path) -> None:
    assert load(tmp_path, '[state]\nbackend = "gcs"\n').state.backend == "gcs"
