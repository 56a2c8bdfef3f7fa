"""What a run says about retries and the circuit breaker (CONTRACT sections 1 and 3): a warehouse that
stops mid-run opens the breaker, the models it never reached fail fast, and each says when a re-run can
work (``errors[].cooldown_seconds``, when a recovery timeout is configured), in the document and the record.

The warehouse is a real PostgreSQL server, stopped at the handshake of a model's ``before_model_run``.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rocky_sdk import types as sdk
from rocky_sdk.types_generated import run_schema

from rocky_engine.project import load_project
from rocky_engine.run.options import RunOptions
from rocky_engine.run.output import RunOutput
from rocky_engine.run.runner import execute_run
from rocky_engine.state.store import StateStore
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.postgres import PgDatabase

pytestmark = pytest.mark.services

BREAKER_MSG = "circuit breaker open after 3 consecutive failures on adapter 'default'"


class StopAt:
    """An event sink that runs ``action`` once, when ``before_model_run`` fires for ``model``."""

    def __init__(self, model: str, action: Any) -> None:
        self.model, self.action, self.done = model, action, False

    def fire(self, event: str, *, model: str | None = None, **_: Any) -> None:
        if event == "before_model_run" and model == self.model and not self.done:
            self.done = True
            self.action()


def _project(root: Path, db: PgDatabase, recovery: str) -> Path:
    (root / "models").mkdir(parents=True)
    for name in "abcdef":
        (root / "models" / f"{name}.sql").write_text(f"SELECT 1 AS x, '{name}' AS m\n")
    server = db.server
    dsn = f"host=127.0.0.1 port={server.port} user={server.user} password={server.password} dbname={db.name}"
    (root / "rocky.toml").write_text(textwrap.dedent(f"""
        [adapter]
        type = "postgres"
        dsn = "{dsn}"

        [adapter.retry]
        max_retries = 2
        initial_backoff_ms = 10
        max_backoff_ms = 20
        circuit_breaker_threshold = 3
        {recovery}

        [pipeline.models]
        type = "transformation"
        models = "models/**"

        [pipeline.models.execution]
        concurrency = 1
    """))
    return root / "rocky.toml"


def _run(config: Path, sink: StopAt) -> RunOutput:
    project = load_project(config, env=dict(os.environ))
    return execute_run(project, RunOptions(), events=sink)


@pytest.mark.parametrize(("recovery", "cooldown"), [
    ("circuit_breaker_recovery_timeout_secs = 600", True),
    ("", False),
])
def test_models_after_an_open_breaker_fail_fast_and_say_when_to_retry(
    tmp_path: Path, pg_db: PgDatabase, recovery: str, cooldown: bool
) -> None:
    config = _project(tmp_path, pg_db, recovery)
    out = _run(config, StopAt("c", pg_db.server.stop))
    doc = out.wire()
    published = sdk.RunResult.model_validate(doc)
    run_schema.RunOutput.model_validate(doc)
    assert (out.status, out.exit_code()) == ("PartialFailure", 2)
    assert [m.asset_key[-1] for m in published.materializations] == ["a", "b"]
    errors = {e["asset_key"][-1]: e for e in doc["errors"]}
    assert sorted(errors) == ["c", "d", "e", "f"]
    assert errors["c"]["failure_kind"] == "connection-failed"  # the failure that opened the breaker
    fast = [errors[n] for n in "def"]
    # a tripped breaker is the published quota-exceeded: what dagster_rocky retries after the cooldown
    assert all(e["failure_kind"] == "quota-exceeded" for e in fast)
    assert all(e["error"].startswith(BREAKER_MSG) for e in fast)
    if cooldown:
        # the rest of the 600 s recovery timeout, rounded up: never 0 or more than the timeout
        assert all(590 <= e["cooldown_seconds"] <= 600 for e in fast), fast
        assert all(e.cooldown_seconds is not None for e in published.errors if e.asset_key[-1] in "def")
        assert "probes the warehouse again 600 s after" in fast[0]["error"]
        # what the Dagster integration makes of these errors: a retry of the step after that cooldown
        import dagster as dg

        from dagster_rocky.execution import raise_for_failures
        from dagster_rocky.streaming import FailedAsset

        failed = {dg.AssetKey(e["asset_key"]): FailedAsset(dg.AssetKey(e["asset_key"]), e["error"],
                                                           e["failure_kind"], e.get("cooldown_seconds"))
                  for e in doc["errors"]}
        with pytest.raises(dg.RetryRequested) as retry:
            raise_for_failures(failed, [], "the run", 2)
        assert 590 <= retry.value.seconds_to_wait <= 600
    else:
        # no half-open probe in this run: nothing to wait for, so no hint (omitted, not null)
        assert all("cooldown_seconds" not in e for e in fast)
        assert "check that the warehouse is reachable, then run again" in fast[0]["error"]
    # the run record keeps the same errors, cooldown included
    with StateStore.open(tmp_path / "models" / ".rocky-state.db", writer=False) as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None and record.status == "PartialFailure" and record.exit_code == 2
    assert record.extra["errors"] == doc["errors"]
    assert [(m.model_name, m.status) for m in record.models_executed] == [
        ("a", "success"), ("b", "success"), ("c", "failed"), ("d", "failed"), ("e", "failed"), ("f", "failed")
    ]


def test_a_statement_retried_after_a_lost_connection_is_reported_and_recorded(
    tmp_path: Path, pg_db: PgDatabase
) -> None:
    config = _project(tmp_path, pg_db, "")
    # the server ends b's connection just before b's statement: the retry reconnects and b lands
    out = _run(config, StopAt("b", lambda: pg_db.server.terminate_backends(pg_db.name)))
    doc = out.wire()
    published = sdk.RunResult.model_validate(doc)
    run_schema.RunOutput.model_validate(doc)
    assert (out.status, out.exit_code()) == ("Success", 0)
    by_name = {m["asset_key"][-1]: m for m in doc["materializations"]}
    assert sorted(by_name) == list("abcdef")
    first, last = by_name["b"]["attempts"]
    assert first["attempt"] == 1 and first["outcome"] == "failed"
    assert first["transient_kind"] == "connection-failed" and first["failure_class"] == "transient"
    assert "terminating connection" in first["error"]
    assert 0 <= first["backoff_ms"] <= 20  # initial_backoff_ms = 10 with jitter, capped at 20
    assert last == {"attempt": 2, "duration_ms": last["duration_ms"], "outcome": "success"}
    # a first-try success carries no trail (omitted, not [])
    assert all("attempts" not in by_name[n] for n in "acdef")
    assert [len(m.attempts) for m in published.materializations] == [0, 2, 0, 0, 0, 0]
    # the run record and `rocky history` keep the same trail
    with StateStore.open(tmp_path / "models" / ".rocky-state.db", writer=False) as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None
    recorded = {m.model_name: m.attempts for m in record.models_executed}
    assert recorded["b"] == by_name["b"]["attempts"] and recorded["a"] is None
    history = rocky_in_process(["-c", str(config), "history", "--output", "json"])
    models = {m["model_name"]: m for m in json.loads(history.stdout)["runs"][0]["models"]}
    assert models["b"]["attempts"] == by_name["b"]["attempts"] and "attempts" not in models["a"]
