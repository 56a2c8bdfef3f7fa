"""Strict types in the sections that decide when and how a pipeline runs (issue 13 item 6).

``freshness = "yes"`` or ``freshness = 1`` used to load as ``true``, ``enabled = "no"`` as ``false`` (a
disabled pipeline) and ``after = "hourly"`` as ``["hourly"]``. Every key of ``[pipeline.*.schedule]``,
``[schedule]``, ``[state]`` and ``[pipeline.*.execution]`` now refuses a value of the wrong TOML type with
one line naming the key, the value and the expected type, in ``rocky validate`` and in every command that
loads the config (exit 1). The table below covers every key of those models: a key added later without a
row here fails ``test_the_table_covers_every_key``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.config import (
    ExecutionConfig,
    IdempotencyConfig,
    PipelineSchedule,
    ScheduleDefaults,
    ScheduleRetry,
    StateConfig,
    StateRetry,
    load_config,
)
from rocky_engine.config.base import valid_keys
from rocky_engine.errors import ConfigError
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import run_rocky

BASE = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.p]
type = "transformation"
models = "models/**"
"""

#: where each model's keys are written, as the header of its TOML table
TABLES = {
    PipelineSchedule: "pipeline.p.schedule",
    ScheduleRetry: "pipeline.p.schedule.retry",
    ScheduleDefaults: "schedule",
    StateConfig: "state",
    IdempotencyConfig: "state.idempotency",
    StateRetry: "state.retry",
    ExecutionConfig: "pipeline.p.execution",
}

BOOL = "a boolean (true or false)"
INT = "an integer"
STR = "a string"
ARRAY = "an array"
TABLE = "a table"
ONE_OF = "input should be"  # a Literal key names its allowed values

#: (table, key, wrong TOML value, how the value reads in the message, the expected-type words)
WRONG: list[tuple[str, str, str, str, str]] = [
    # [pipeline.*.schedule]
    ("pipeline.p.schedule", "cron", "5", "5", STR),
    ("pipeline.p.schedule", "cron", '["0 3 * * *"]', "an array", STR),
    ("pipeline.p.schedule", "timezone", "true", "true", STR),
    ("pipeline.p.schedule", "after", '"hourly"', "'hourly'", ARRAY),
    ("pipeline.p.schedule", "after", "1", "1", ARRAY),
    ("pipeline.p.schedule", "after", '["raw", 1]', "1", STR),
    ("pipeline.p.schedule", "freshness", '"yes"', "'yes'", BOOL),
    ("pipeline.p.schedule", "freshness", "1", "1", BOOL),
    ("pipeline.p.schedule", "freshness", '"true"', "'true'", BOOL),
    ("pipeline.p.schedule", "catchup", "1", "1", ONE_OF),
    ("pipeline.p.schedule", "catchup", "true", "true", ONE_OF),
    ("pipeline.p.schedule", "retry", "3", "3", TABLE),
    ("pipeline.p.schedule", "timeout_minutes", '"30"', "'30'", INT),
    ("pipeline.p.schedule", "timeout_minutes", "1.5", "1.5", INT),
    ("pipeline.p.schedule", "timeout_minutes", "true", "true", INT),
    ("pipeline.p.schedule", "enabled", '"no"', "'no'", BOOL),
    ("pipeline.p.schedule", "enabled", "0", "0", BOOL),
    ("pipeline.p.schedule.retry", "max", '"2"', "'2'", INT),
    ("pipeline.p.schedule.retry", "max", "false", "false", INT),
    # [schedule]
    ("schedule", "timezone", "0", "0", STR),
    # [state]
    ("state", "backend", "1", "1", ONE_OF),
    ("state", "s3_bucket", "7", "7", STR),
    ("state", "s3_prefix", "false", "false", STR),
    ("state", "s3_endpoint_url", "1", "1", STR),
    ("state", "valkey_url", "1", "1", STR),
    ("state", "valkey_prefix", '["a"]', "an array", STR),
    ("state", "transfer_timeout_seconds", '"300"', "'300'", INT),
    ("state", "transfer_timeout_seconds", "true", "true", INT),
    ("state", "on_upload_failure", "true", "true", ONE_OF),
    ("state", "concurrency_control", "1", "1", ONE_OF),
    ("state", "on_schema_mismatch", "false", "false", ONE_OF),
    ("state", "idempotency", '"30d"', "'30d'", TABLE),
    ("state", "retry", '"3"', "'3'", TABLE),
    ("state.retry", "max_retries", '"3"', "'3'", INT),
    ("state.retry", "initial_backoff_ms", "1.5", "1.5", INT),
    ("state.retry", "max_backoff_ms", "true", "true", INT),
    ("state.retry", "backoff_multiplier", '"2"', "'2'", "a number"),
    ("state.retry", "jitter", '"no"', "'no'", BOOL),
    ("state.retry", "circuit_breaker_threshold", '"5"', "'5'", INT),
    ("state.retry", "circuit_breaker_recovery_timeout_secs", "false", "false", INT),
    ("state.retry", "max_retries_per_run", "2.5", "2.5", INT),
    ("state.idempotency", "retention_days", '"30"', "'30'", INT),
    ("state.idempotency", "dedup_on", "1", "1", ONE_OF),
    ("state.idempotency", "in_flight_ttl_hours", "2.5", "2.5", INT),
    # [pipeline.*.execution]
    ("pipeline.p.execution", "concurrency", '"4"', "'4'", 'positive integer or "adaptive"'),
    ("pipeline.p.execution", "concurrency", "true", "true", 'positive integer or "adaptive"'),
    ("pipeline.p.execution", "fail_fast", '"yes"', "'yes'", BOOL),
    ("pipeline.p.execution", "fail_fast", "1", "1", BOOL),
    ("pipeline.p.execution", "error_rate_abort_pct", '"50"', "'50'", INT),
    ("pipeline.p.execution", "table_retries", "1.0", "1.0", INT),
]

#: one right-typed value per key: these must keep loading
RIGHT: list[tuple[str, str, str]] = [
    ("pipeline.p.schedule", "cron", '"0 3 * * *"'),
    ("pipeline.p.schedule", "timezone", '"Europe/Lisbon"'),
    ("pipeline.p.schedule", "after", '["p"]'),
    ("pipeline.p.schedule", "freshness", "false"),
    ("pipeline.p.schedule", "catchup", '"skip"'),
    ("pipeline.p.schedule", "retry", "{ max = 2 }"),
    ("pipeline.p.schedule", "timeout_minutes", "30"),
    ("pipeline.p.schedule", "enabled", "false"),
    ("pipeline.p.schedule.retry", "max", "3"),
    ("schedule", "timezone", '"UTC"'),
    ("state", "backend", '"local"'),
    ("state", "s3_bucket", '"b"'),
    ("state", "s3_prefix", '"p/"'),
    ("state", "s3_endpoint_url", '"http://127.0.0.1:9000"'),
    ("state", "valkey_url", '"redis://127.0.0.1:6379"'),
    ("state", "valkey_prefix", '"x:"'),
    ("state", "transfer_timeout_seconds", "60"),
    ("state", "on_upload_failure", '"fail"'),
    ("state", "concurrency_control", '"cas"'),
    ("state", "on_schema_mismatch", '"fail"'),
    ("state", "idempotency", "{ retention_days = 7 }"),
    ("state", "retry", "{ max_retries = 1 }"),
    ("state.retry", "max_retries", "5"),
    ("state.retry", "initial_backoff_ms", "10"),
    ("state.retry", "max_backoff_ms", "100"),
    ("state.retry", "backoff_multiplier", "2"),
    ("state.retry", "jitter", "false"),
    ("state.retry", "circuit_breaker_threshold", "0"),
    ("state.retry", "circuit_breaker_recovery_timeout_secs", "30"),
    ("state.retry", "max_retries_per_run", "4"),
    ("state.idempotency", "retention_days", "7"),
    ("state.idempotency", "dedup_on", '"any"'),
    ("state.idempotency", "in_flight_ttl_hours", "2"),
    ("pipeline.p.execution", "concurrency", '"adaptive"'),
    ("pipeline.p.execution", "fail_fast", "true"),
    ("pipeline.p.execution", "error_rate_abort_pct", "10"),
    ("pipeline.p.execution", "table_retries", "0"),
]


def _config(table: str, key: str, value: str) -> str:
    return f"{BASE}\n[{table}]\n{key} = {value}\n"


def _project(tmp_path: Path, text: str) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "m.sql").write_text("select 1 as a\n")
    config = tmp_path / "rocky.toml"
    config.write_text(text)
    return config


def test_the_table_covers_every_key() -> None:
    for cls, table in TABLES.items():
        keys = set(valid_keys(cls))
        assert keys <= {k for t, k, *_ in WRONG if t == table}, f"[{table}] keys without a wrong-type row"
        assert keys <= {k for t, k, _ in RIGHT if t == table}, f"[{table}] keys without a right-type row"


@pytest.mark.parametrize(("table", "key", "value", "shown", "expected"), WRONG)
def test_a_wrong_type_is_one_line_naming_key_value_and_type(
    tmp_path: Path, table: str, key: str, value: str, shown: str, expected: str
) -> None:
    config = _project(tmp_path, _config(table, key, value))
    with pytest.raises(ConfigError) as info:
        load_config(config, env={})
    message = str(info.value)
    assert "\n" not in message
    dotted = f"{table}.{key}" if not value.startswith("[") or shown == "an array" else f"{table}.{key}[1]"
    assert f"{config}: {dotted}: " in message, message
    assert shown in message and expected in message, message

    # rocky validate reports it as V001 and exits 1
    result = rocky_in_process(["-c", str(config), "validate", "--output", "json"])
    assert result.returncode == 1
    assert '"code": "V001"' in result.stdout and dotted in result.stdout


@pytest.mark.parametrize(("table", "key", "value"), RIGHT)
def test_the_right_type_still_loads(tmp_path: Path, table: str, key: str, value: str) -> None:
    config = _project(tmp_path, _config(table, key, value))
    load_config(config, env={})


def test_values_are_not_coerced(tmp_path: Path) -> None:
    cfg = load_config(
        _project(
            tmp_path,
            BASE + '[pipeline.p.schedule]\nafter = ["p"]\nfreshness = true\nenabled = false\n'
            "timeout_minutes = 5\n[pipeline.p.execution]\nconcurrency = 2\nfail_fast = true\n",
        ),
        env={},
    )
    pipeline = cfg.pipeline("p")
    assert pipeline.schedule is not None
    assert (pipeline.schedule.after, pipeline.schedule.freshness, pipeline.schedule.enabled) == (
        ["p"], True, False,
    )
    assert (pipeline.execution.concurrency, pipeline.execution.fail_fast) == (2, True)


#: every command that loads rocky.toml (argv after -c CONFIG), the exit code a bad config gives it, and
#: whether the refusal is in its JSON document (a report) rather than an ``error:`` line
COMMANDS = [
    (["run", "--pipeline", "p"], 1, False),
    (["discover"], 1, False),
    (["load", "--pipeline", "p"], 1, False),
    (["tick"], 1, False),
    (["tick", "--dry-run"], 1, False),
    (["brief"], 1, False),
    (["hooks", "list"], 1, False),
    (["state", "schedule", "pause", "p"], 1, False),
    (["state", "schedule", "spool"], 1, False),
    (["validate"], 1, True),
    (["ci"], 1, True),
    (["doctor"], 3, True),  # doctor reports the config as a Critical finding
]


@pytest.mark.parametrize(("argv", "code", "reported"), COMMANDS, ids=[" ".join(a) for a, *_ in COMMANDS])
def test_every_command_that_loads_the_config_refuses_it(
    tmp_path: Path, argv: list[str], code: int, reported: bool
) -> None:
    config = _project(tmp_path, _config("pipeline.p.schedule", "enabled", '"no"'))
    result = rocky_in_process(["-c", str(config), *argv, "--output", "json"])
    assert result.returncode == code, (result.stdout, result.stderr)
    wanted = "pipeline.p.schedule.enabled: expected a boolean (true or false), got the string 'no'"
    if reported:
        assert wanted in result.stdout
    else:
        assert [line for line in result.error_lines if wanted in line], result.stderr
        assert len(result.error_lines) == 1 and "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["validate"], 1), (["tick"], 1), (["run"], 1), (["serve", "--port", "0"], 1)],
    ids=["validate", "tick", "run", "serve"],
)
def test_a_real_rocky_refuses_a_wrong_type(tmp_path: Path, argv: list[str], code: int) -> None:
    # serve runs as a real process only: had it accepted the config, it would serve until killed
    config = _project(tmp_path, _config("pipeline.p.schedule", "freshness", "1"))
    result = run_rocky(["-c", str(config), *argv], cwd=tmp_path, timeout=60)
    assert result.returncode == code
    wanted = "pipeline.p.schedule.freshness: expected a boolean (true or false), got the integer 1"
    assert wanted in (result.stdout if argv == ["validate"] else result.stderr)
