"""Command hooks on real runs: context on stdin, env, on_failure warn / ignore / abort, timeouts."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import duckdb
import pytest

from rocky_engine.config.hooks import CommandHook
from rocky_engine.hooks.commands import program_name, run_command_hook
from rocky_engine.hooks.event import HookEvent
from tests.engine.hooks.kit import BAD_SQL, GOOD_SQL, make_project, rocky, run_in_process


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _tables(root: Path) -> set[str]:
    con = duckdb.connect(str(root / "wh.duckdb"), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                          "WHERE table_schema = 'main'").fetchall()}
    finally:
        con.close()


def test_command_hooks_receive_the_context_on_stdin(tmp_path: Path) -> None:
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl"\n'
        for event in ("pipeline_start", "before_model_run", "after_model_run", "pipeline_complete",
                      "pipeline_error")
    )
    config = make_project(tmp_path, {"good": GOOD_SQL}, extra_toml=hooks)
    out = run_in_process(config)
    assert out.status == "Success"
    events = _events(tmp_path / "events.jsonl")
    assert [e["event"] for e in events] == ["pipeline_start", "before_model_run", "after_model_run",
                                            "pipeline_complete"]
    for event in events:
        assert event["run_id"] == out.run_id
        assert event["pipeline"] == "models"
        assert str(event["timestamp"]).endswith("Z")
        assert isinstance(event["metadata"], dict)
    start, before, after, complete = events
    assert start["metadata"] == {"pipeline_type": "transformation"}
    assert "model" not in start and "error" not in start
    assert before["model"] == "good" and before["table"] == "wh.main.good"
    assert isinstance(after["duration_ms"], int)
    assert complete["metadata"]["status"] == "Success"
    assert complete["metadata"]["exit_code"] == 0
    assert complete["metadata"]["tables_copied"] == 1


def test_hook_env_and_working_directory(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml="""
        [[hook.on_pipeline_complete]]
        command = 'echo "$ROCKY_EVENT $ROCKY_PIPELINE $ROCKY_RUN_ID $GREETING" > env.txt'
        env = { GREETING = "hello" }
        """)
    out = run_in_process(config)
    words = (tmp_path / "env.txt").read_text().split()
    assert words == ["pipeline_complete", "models", str(out.run_id), "hello"]


def test_partial_failure_fires_model_error_complete_and_error(tmp_path: Path) -> None:
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl"\n'
        for event in ("model_error", "pipeline_complete", "pipeline_error")
    )
    config = make_project(tmp_path, {"good": GOOD_SQL, "bad": BAD_SQL}, extra_toml=hooks)
    out = run_in_process(config)
    assert out.status == "PartialFailure"
    events = {e["event"]: e for e in _events(tmp_path / "events.jsonl")}
    assert set(events) == {"model_error", "pipeline_complete", "pipeline_error"}
    assert events["model_error"]["model"] == "bad"
    assert "no_such_column" in str(events["model_error"]["error"])
    error = events["pipeline_error"]
    assert error["metadata"]["status"] == "PartialFailure"
    assert error["metadata"]["exit_code"] == 2
    assert error["metadata"]["failed_tables"] == ["wh.main.bad"]
    assert str(error["error"]).startswith("1 table(s) failed (wh.main.bad); first error:")


def test_total_failure_fires_only_pipeline_error(tmp_path: Path) -> None:
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl"\n'
        for event in ("pipeline_complete", "pipeline_error")
    )
    config = make_project(tmp_path, {"bad": BAD_SQL}, extra_toml=hooks)
    out = run_in_process(config)
    assert out.status == "Failure"
    assert [e["event"] for e in _events(tmp_path / "events.jsonl")] == ["pipeline_error"]


def test_failing_hook_warns_and_the_run_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = make_project(tmp_path, extra_toml="""
        [[hook.on_pipeline_start]]
        command = "echo 'cannot reach the pager' >&2; exit 3"
        """)
    with caplog.at_level(logging.WARNING, logger="rocky"):
        out = run_in_process(config)
    assert out.status == "Success"
    assert "hook on_pipeline_start[0] (echo) exited with code 3: cannot reach the pager; the run goes on" in (
        caplog.text
    )


def test_ignore_stays_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = make_project(tmp_path, extra_toml="""
        [[hook.on_pipeline_start]]
        command = "exit 4"
        on_failure = "ignore"
        """)
    with caplog.at_level(logging.WARNING, logger="rocky"):
        out = run_in_process(config)
    assert out.status == "Success"
    assert "on_pipeline_start" not in caplog.text


def test_abort_on_pipeline_start_stops_the_run_before_any_work(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"good": GOOD_SQL}, extra_toml="""
        [[hook.on_pipeline_start]]
        command = "exit 7"
        on_failure = "abort"

        [[hook.on_pipeline_error]]
        command = "cat > error.json"
        """)
    out = run_in_process(config)
    assert out.status == "Failure"
    assert out.exit_code() == 1
    assert [(e.failure_kind, e.cause) for e in out.errors] == [("unknown", "hook-abort")]
    assert out.errors[0].error.startswith("aborted by hook on_pipeline_start[0] (exit) exited with code 7")
    assert "good" not in _tables(tmp_path)
    error = json.loads((tmp_path / "error.json").read_text())
    assert error["metadata"]["status"] == "Failure"
    assert "aborted by hook on_pipeline_start[0]" in error["error"]
    from rocky_engine.state.store import StateStore

    with StateStore.open(tmp_path / "models" / ".rocky-state.db", writer=False) as store:
        record = store.runs.get(str(out.run_id))
    assert record is not None and record.status == "Failure"


def test_abort_before_a_model_stops_every_later_materialization(tmp_path: Path) -> None:
    config = make_project(
        tmp_path,
        {"a_model": GOOD_SQL, "b_model": GOOD_SQL, "c_model": GOOD_SQL},
        extra_toml="""
        [[hook.on_before_model_run]]
        command = "if grep -q '\\"model\\":\\"b_model\\"'; then exit 1; fi"
        on_failure = "abort"
        """,
    )
    out = run_in_process(config, parallel=1)
    assert out.status == "PartialFailure"
    assert [m.asset_key[-1] for m in out.materializations] == ["a_model"]
    errors = {e.asset_key[-1]: e.error for e in out.errors}
    assert errors["b_model"].startswith("aborted by hook on_before_model_run[0] (if) exited with code 1")
    assert errors["c_model"] == "skipped: the run was aborted by a hook on_before_model_run"
    assert _tables(tmp_path) == {"a_model"}


def test_compile_complete_fires_once_after_every_model_compiled(tmp_path: Path) -> None:
    hooks = "".join(
        f'\n[[hook.on_{event}]]\ncommand = "cat >> events.jsonl"\n'
        for event in ("pipeline_start", "compile_complete", "before_model_run")
    )
    config = make_project(
        tmp_path, {"good": GOOD_SQL, "unset_var": "SELECT {{ var('missing') }} AS v"}, extra_toml=hooks
    )
    out = run_in_process(config, parallel=1)
    assert out.status == "PartialFailure"
    events = _events(tmp_path / "events.jsonl")
    names = [e["event"] for e in events]
    assert names[:2] == ["pipeline_start", "compile_complete"]
    assert names.count("compile_complete") == 1
    assert events[1]["metadata"] == {"models": 2, "compiled": 1, "failed": ["unset_var"]}
    # The model that did not compile still fails in its own turn, as a compile error.
    assert [(e.asset_key[-1], e.failure_kind) for e in out.errors] == [("unset_var", "compile-error")]


def test_abort_on_compile_complete_builds_nothing(tmp_path: Path) -> None:
    config = make_project(tmp_path, {"good": GOOD_SQL}, extra_toml="""
        [[hook.on_compile_complete]]
        command = "exit 3"
        on_failure = "abort"
        """)
    out = run_in_process(config)
    assert out.status == "Failure"
    assert out.errors[0].error.startswith("aborted by hook on_compile_complete[0] (exit) exited with code 3")
    assert "good" not in _tables(tmp_path)


def test_abort_on_an_after_event_only_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = make_project(tmp_path, extra_toml="""
        [[hook.on_after_model_run]]
        command = "exit 1"
        on_failure = "abort"
        """)
    with caplog.at_level(logging.WARNING, logger="rocky"):
        out = run_in_process(config)
    assert out.status == "Success"
    assert "abort only stops a run on events before work" in caplog.text


def test_timeout_kills_the_hook_and_its_children(tmp_path: Path) -> None:
    hook = CommandHook(command="sleep 30 & sleep 30; echo never > late.txt", timeout_ms=300)
    event = HookEvent(event="pipeline_start", run_id="r1", pipeline="p", timestamp="2026-01-01T00:00:00Z")
    t0 = time.monotonic()
    outcome = run_command_hook(hook, event, cwd=tmp_path)
    assert time.monotonic() - t0 < 5
    assert outcome.timed_out and not outcome.ok and outcome.exit_code is None
    assert outcome.describe().startswith("timed out after")
    assert not (tmp_path / "late.txt").exists()


def test_a_hook_that_ignores_stdin_is_fine(tmp_path: Path) -> None:
    hook = CommandHook(command="true")
    event = HookEvent(event="pipeline_start", run_id="r1", pipeline="p", timestamp="t",
                      metadata={"blob": "x" * 200_000})
    assert run_command_hook(hook, event, cwd=tmp_path).ok


def test_program_name_never_shows_arguments() -> None:
    assert program_name("/srv/analytics/send-brief.sh --token abc") == "send-brief.sh"
    assert program_name("curl -H 'Authorization: Bearer xyz' https://x") == "curl"
    assert program_name("'unterminated") == "'unterminated"


def test_unknown_hook_key_is_warned_by_run_and_validate(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml="""
        [[hook.on_pipeline_eror]]
        command = "true"
        """)
    run = rocky(config, "run", "--output", "json")
    assert run.returncode == 0, run.stderr
    assert "unknown hook event 'on_pipeline_eror' in [hook] skipped" in run.stderr
    validate = rocky(config, "validate", "--output", "json")
    assert validate.returncode == 0
    messages = json.loads(validate.stdout)["messages"]
    expected = {"severity": "warning", "code": "V012", "field": "hook.on_pipeline_eror"}
    assert expected.items() <= messages[0].items()


def test_unset_variable_in_a_hook_fails_config_loading(tmp_path: Path) -> None:
    config = make_project(tmp_path, extra_toml="""
        [hook.webhooks.on_pipeline_error]
        url = "${ROCKY_TEST_UNSET_SLACK_URL}"
        preset = "slack"
        """)
    run = rocky(config, "run", "--output", "json")
    assert run.returncode == 1
    assert "environment variable ROCKY_TEST_UNSET_SLACK_URL is not set" in run.stderr
    assert rocky(config, "validate", "--output", "json").returncode == 1


OTHER_PIPELINES = """
[pipeline.q]
type = "quality"
tables = [{ catalog = "wh", schema = "raw", table = "orders" }]
[pipeline.q.checks]
row_count = true

[pipeline.snap]
type = "snapshot"
unique_key = ["id"]
updated_at = "updated_at"
[pipeline.snap.source]
catalog = "wh"
schema = "raw"
table = "customers"
[pipeline.snap.target]
catalog = "wh"
schema = "snapshots"
table = "customers_history"
"""


@pytest.mark.parametrize(
    ("pipeline", "inner"),
    [("q", ["before_checks", "check_result", "after_checks"]),
     ("snap", ["before_materialize", "after_materialize"])],
)
def test_quality_and_snapshot_runs_fire_their_events(tmp_path: Path, pipeline: str, inner: list[str]) -> None:
    events = ("pipeline_start", "before_checks", "check_result", "after_checks", "before_materialize",
              "after_materialize", "pipeline_complete", "pipeline_error")
    hooks = "".join(f'\n[[hook.on_{e}]]\ncommand = "cat >> events.jsonl"\n' for e in events)
    config = make_project(tmp_path, extra_toml=OTHER_PIPELINES + hooks)
    con = duckdb.connect(str(tmp_path / "wh.duckdb"))
    con.execute("CREATE TABLE raw.customers AS SELECT 1 AS id, 'ann' AS name, "
                "TIMESTAMP '2026-01-01 00:00:00' AS updated_at")
    con.close()
    out = run_in_process(config, pipeline=pipeline)
    assert out.status == "Success", out.errors
    fired = [e["event"] for e in _events(tmp_path / "events.jsonl")]
    assert fired[0] == "pipeline_start" and fired[-1] == "pipeline_complete"
    assert [e for e in fired[1:-1] if e in inner] == fired[1:-1]
    assert set(inner) <= set(fired)
    assert all(e["pipeline"] == pipeline for e in _events(tmp_path / "events.jsonl"))


REPLICATION = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
type = "replication"
strategy = "full_refresh"
timestamp_column = "ts"

[pipeline.raw.execution]
concurrency = 1

[pipeline.raw.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["tenant"]

[pipeline.raw.target]
catalog_template = "wh"
schema_template = "raw_{tenant}"
"""


def test_replication_fires_its_events_and_an_abort_stops_the_next_tables(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    events = ("pipeline_start", "discover_complete", "before_materialize", "after_materialize",
              "pipeline_complete", "pipeline_error")
    hooks = "".join(f'\n[[hook.on_{e}]]\ncommand = "cat >> events.jsonl"\n' for e in events)
    config.write_text(REPLICATION + hooks)
    con = duckdb.connect(str(tmp_path / "wh.duckdb"))
    con.execute("CREATE SCHEMA src__acme")
    for table in ("a_orders", "b_payments", "c_refunds"):
        con.execute(f"CREATE TABLE src__acme.{table} AS SELECT 1 AS id, TIMESTAMP '2026-01-01' AS ts")
    con.close()
    out = run_in_process(config)
    assert out.status == "Success", out.errors
    fired = [e["event"] for e in _events(tmp_path / "events.jsonl")]
    assert fired[:2] == ["pipeline_start", "discover_complete"] and fired[-1] == "pipeline_complete"
    assert fired.count("before_materialize") == 3 and fired.count("after_materialize") == 3

    (tmp_path / "events.jsonl").unlink()
    config.write_text(REPLICATION + """
[[hook.on_before_materialize]]
command = "if grep -q b_payments; then exit 9; fi"
on_failure = "abort"

[[hook.on_pipeline_error]]
command = "cat > error.json"
""")
    out = run_in_process(config)
    assert out.status == "PartialFailure"
    assert len(out.materializations) == 1
    errors = sorted(e.error for e in out.errors)
    assert errors[0].startswith("aborted by hook on_before_materialize[0] (if) exited with code 9")
    assert "aborted" in errors[1]  # the replication runner names the table the abort happened at
    assert json.loads((tmp_path / "error.json").read_text())["metadata"]["status"] == "PartialFailure"
