"""[hook] command hooks and webhooks; [connector.NAME] child connectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.config import HOOK_EVENTS, RockyConfig, load_config
from rocky_engine.errors import ConfigError

ADAPTER = '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n'


def load(tmp_path: Path, text: str) -> RockyConfig:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={})


def error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return info.value


# --- hooks ----------------------------------------------------------------------------------------------


def test_hook_events_are_the_contract_list() -> None:
    assert len(HOOK_EVENTS) == 18
    assert HOOK_EVENTS[0] == "pipeline_start" and HOOK_EVENTS[-1] == "budget_breach"
    assert all(not e.startswith("on_") for e in HOOK_EVENTS)


def test_command_hooks_keyed_without_prefix(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[[hook.on_pipeline_error]]\ncommand = "notify.sh"\non_failure = "abort"\nenv = { CHANNEL = "ops" }\n'
        '[[hook.on_pipeline_error]]\ncommand = "page.sh"\n'
        '[hook.on_pipeline_start]\ncommand = "start.sh"\ntimeout_ms = 500\n',
    )
    errors = cfg.hook.commands["pipeline_error"]
    assert [h.command for h in errors] == ["notify.sh", "page.sh"]
    assert errors[0].on_failure == "abort" and errors[0].env == {"CHANNEL": "ops"}
    assert errors[1].timeout_ms == 30000 and errors[1].on_failure == "warn"
    assert cfg.hook.commands["pipeline_start"][0].timeout_ms == 500
    commands, webhook = cfg.hook.for_event("on_pipeline_error")
    assert len(commands) == 2 and webhook is None
    assert cfg.warnings == []


def test_webhooks(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[hook.webhooks.on_pipeline_error]\nurl = "https://hooks.example/x"\npreset = "slack"\n'
        '[hook.webhooks.on_budget_breach]\nurl = "http://127.0.0.1:9/y"\nmethod = "put"\n'
        'headers = { "X-Team" = "data" }\nsecret = "abc"\nretry_count = 2\n',
    )
    slack = cfg.hook.webhooks["pipeline_error"]
    assert slack.preset == "slack" and slack.method == "POST" and slack.timeout_ms == 10000
    assert slack.retry_count == 0 and slack.retry_delay_ms == 1000 and slack.secret is None
    other = cfg.hook.webhooks["budget_breach"]
    assert other.method == "PUT" and other.headers == {"X-Team": "data"} and other.retry_count == 2
    assert other.secret is not None and other.secret.get_secret_value() == "abc"
    assert other.preset == "generic"


def test_unknown_hook_events_are_skipped_with_warning(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[[hook.on_pipeline_errror]]\ncommand = "x"\n'
        '[hook.webhooks.on_nope]\nurl = "http://127.0.0.1/"\n'
        '[[hook.on_model_error]]\ncommand = "ok"\n',
    )
    assert list(cfg.hook.commands) == ["model_error"]
    assert cfg.hook.webhooks == {}
    valid = ", ".join(f"on_{e}" for e in HOOK_EVENTS)
    assert cfg.warnings == [
        f"unknown hook event 'on_pipeline_errror' in [hook] skipped; valid events: {valid}",
        f"unknown hook event 'on_nope' in [hook.webhooks] skipped; valid events: {valid}",
    ]


def test_bad_hook_values(tmp_path: Path) -> None:
    exc = error(tmp_path, '[[hook.on_pipeline_start]]\ncommand = "x"\non_failure = "explode"\n')
    assert exc.key == "hook.on_pipeline_start[0].on_failure"
    assert "input should be 'warn', 'ignore' or 'abort'" in str(exc)
    exc = error(tmp_path, '[hook.webhooks.on_pipeline_start]\nurl = "http://x"\npreset = "discord"\n')
    assert exc.key == "hook.webhooks.on_pipeline_start.preset"
    exc = error(tmp_path, '[hook.webhooks.on_pipeline_start]\nurl = "http://x"\nmethod = "delete"\n')
    assert str(exc).endswith("method must be POST, PUT, PATCH or GET (got 'delete')")
    exc = error(tmp_path, "[[hook.on_pipeline_start]]\ntimeout_ms = 5\n")
    assert "missing required key 'command' in [hook.on_pipeline_start[0]]" in str(exc)


def test_hook_event_must_hold_tables(tmp_path: Path) -> None:
    exc = error(tmp_path, '[hook]\non_pipeline_start = "echo hi"\n')
    assert "[[hook.on_pipeline_start]] must be a table or an array of tables" in str(exc)


# --- connectors -----------------------------------------------------------------------------------------

CONNECTOR = """
[connector.stripe_charges]
manifest   = "connectors/stripe/connector.toml"
output_uri = "file://./.rocky/landing/stripe"
secrets    = ["STRIPE_API_KEY"]
target     = { catalog = "raw", schema = "stripe", table = "charges" }
retries    = 1

[connector.stripe_charges.limits]
wall_time_secs = 3600
output_bytes   = 5368709120
"""


def test_connector_from_the_seed(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + CONNECTOR)
    c = cfg.connector("stripe_charges")
    assert c.secrets == ["STRIPE_API_KEY"] and c.retries == 1 and c.keep_scratch is False
    assert c.target.adapter == "default" and c.target.full_name == "raw.stripe.charges"
    assert c.limits.wall_time_secs == 3600 and c.limits.output_bytes == 5368709120
    assert c.limits.cpu_time_secs is None and c.limits.memory_bytes is None
    assert c.contract is None
    assert c.output_dir(cfg.root) == tmp_path / ".rocky" / "landing" / "stripe"
    assert c.manifest_path(cfg.root) == tmp_path / "connectors" / "stripe" / "connector.toml"


def test_connector_defaults_contract_and_absolute_uri(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        ADAPTER + '[connectors.c]\nmanifest = "m.toml"\noutput_uri = "file:///srv/landing"\n'
        'target = { catalog = "raw", schema = "s", table = "t" }\n'
        '[connectors.c.contract]\ncolumns = [{ name = "id", type = "BIGINT" }]\n',
    )
    c = cfg.connector("c")
    assert c.retries == 1 and c.secrets == [] and c.output_dir(cfg.root) == Path("/srv/landing")
    assert c.contract == {"columns": [{"name": "id", "type": "BIGINT"}]}


@pytest.mark.parametrize("uri", ["s3://bucket/landing", "gs://bucket/landing"])
def test_remote_output_uri_not_supported_yet(tmp_path: Path, uri: str) -> None:
    exc = error(tmp_path, ADAPTER + CONNECTOR.replace("file://./.rocky/landing/stripe", uri))
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: connector.stripe_charges.output_uri: output_uri {uri} is not supported "
        "yet; only file:// works"
    )


def test_output_uri_must_be_file_uri(tmp_path: Path) -> None:
    exc = error(tmp_path, ADAPTER + CONNECTOR.replace("file://./.rocky/landing/stripe", "./landing"))
    assert exc.key == "connector.stripe_charges.output_uri"
    assert "output_uri must be a file:// URI such as file://./.rocky/landing/<name> (got './landing')" in str(
        exc
    )


@pytest.mark.parametrize(
    ("old", "new", "key", "fragment"),
    [
        ("retries    = 1", "retries    = 11", "connector.stripe_charges.retries", "less than or equal to 10"),
        (
            "retries    = 1",
            "retries    = -1",
            "connector.stripe_charges.retries",
            "greater than or equal to 0",
        ),
        (
            "wall_time_secs = 3600",
            "wall_time_secs = 604801",
            "connector.stripe_charges.limits.wall_time_secs",
            "less than or equal to 604800",
        ),
        (
            "wall_time_secs = 3600",
            "wall_time_secs = 0",
            "connector.stripe_charges.limits.wall_time_secs",
            "greater than or equal to 1",
        ),
        (
            '["STRIPE_API_KEY"]',
            '["STRIPE-KEY"]',
            "connector.stripe_charges.secrets",
            "secrets holds environment variable names; 'STRIPE-KEY' is not one",
        ),
        (
            ', table = "charges" }',
            " }",
            "connector.stripe_charges.target.table",
            "missing required key 'table'",
        ),
    ],
)
def test_connector_bad_values(tmp_path: Path, old: str, new: str, key: str, fragment: str) -> None:
    exc = error(tmp_path, ADAPTER + CONNECTOR.replace(old, new))
    assert exc.key == key
    assert fragment in str(exc)


def test_connector_max_values_accepted(tmp_path: Path) -> None:
    text = ADAPTER + CONNECTOR.replace("retries    = 1", "retries    = 10").replace("3600", "604800")
    c = load(tmp_path, text).connector("stripe_charges")
    assert c.retries == 10 and c.limits.wall_time_secs == 604800


def test_connector_target_on_discovery_adapter_refused(tmp_path: Path) -> None:
    text = (
        '[adapter.ft]\ntype = "fivetran"\napi_key = "k"\napi_secret = "s"\ndestination_id = "d"\n'
        + CONNECTOR.replace("target     = { catalog", 'target     = { adapter = "ft", catalog')
    )
    exc = error(tmp_path, text)
    assert str(exc) == (
        f"{tmp_path / 'rocky.toml'}: connector.stripe_charges.target.adapter: connector 'stripe_charges' "
        "targets adapter 'ft' of type 'fivetran', which cannot receive rows; point target.adapter at a "
        "duckdb or postgres adapter"
    )


def test_connector_bigquery_target_refused_at_load(tmp_path: Path) -> None:
    text = '[adapter.bq]\ntype = "bigquery"\n' + CONNECTOR.replace("{ catalog", '{ adapter = "bq", catalog')
    exc = error(tmp_path, text)
    assert "BigQuery is not supported: it does not accept local Parquet files" in str(exc)


TOKEN = "T0KEN-abc123-secret"


@pytest.mark.parametrize(
    "url",
    [f"hooks.slack.com/services/{TOKEN}", f"ftp://hooks.example/{TOKEN}", f"https:///{TOKEN}", f"{TOKEN}"],
    ids=["no scheme", "not http", "no host", "a bare word"],
)
def test_a_webhook_url_that_can_never_deliver_is_refused_without_echoing_it(tmp_path: Path, url: str) -> None:
    err = error(tmp_path, ADAPTER + f'[hook.webhooks.on_pipeline_error]\nurl = "{url}"\n')
    assert err.key == "hook.webhooks.on_pipeline_error.url"
    assert "must be an http:// or https:// URL with a host" in str(err)
    assert TOKEN not in str(err) and TOKEN not in repr(err)


def test_http_and_https_webhook_urls_with_a_host_load(tmp_path: Path) -> None:
    cfg = load(tmp_path, ADAPTER + '[hook.webhooks.on_pipeline_error]\nurl = "HTTPS://hooks.example:8443/x?y=1"\n'
               '[hook.webhooks.on_pipeline_start]\nurl = "http://[::1]:9/"\n')
    assert cfg.hook.webhooks["pipeline_error"].url == "HTTPS://hooks.example:8443/x?y=1"
    assert cfg.hook.webhooks["pipeline_start"].url == "http://[::1]:9/"
