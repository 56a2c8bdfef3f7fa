"""Every way a ``rocky run`` can end, each held to one story: exit code == JSON document == run record,
as CONTRACT section 3 says (Success 0, PartialFailure 2, Failure 1, interrupted 130 and never a Success;
an error after the work landed is a Failure naming it, exit 1, with the document printed first).

Endings that need no signal run in this process (the CLI's own entry point); the signalled ones are real
``rocky run`` processes stopped at a handshake (a hook that wrote its pids), as the seeds' operators stop
them: SIGINT and SIGTERM from a terminal or a supervisor, the drain of ``rocky serve`` and
``timeout_minutes`` (both through the scheduler's spawner, which is what the server and the tick use).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest
from rocky_sdk import types as sdk
from rocky_sdk.types_generated import run_schema

from rocky_engine.schedule.spawner import ChildRequest, SubprocessSpawner
from rocky_engine.state.store import StateStore
from tests.engine.outcomes.kit import (
    assert_one_story,
    closed_port,
    ending_in_process,
    ending_of_child,
    ending_of_signal,
    project,
    sqlite,
    store_of,
)
from tests.engine.process.kit import sleeping_hook, wait_for_hook
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import child_env

GOOD = {"good.sql": "select 1 as x\n"}
BROKEN = {"broken.sql": "select * from no_such_table\n"}


def _hook(event: str, command: str, on_failure: str = "abort") -> str:
    return f'\n[[hook.on_{event}]]\ncommand = "{command}"\non_failure = "{on_failure}"\n'


# ---------------------------------------------------------------------------------------- in process


def test_success(tmp_path: Path) -> None:
    assert_one_story(ending_in_process(project(tmp_path, GOOD)), "Success")


def test_partial_failure(tmp_path: Path) -> None:
    end = ending_in_process(project(tmp_path, {**GOOD, **BROKEN}))
    assert_one_story(end, "PartialFailure", error="no_such_table")


def test_failure(tmp_path: Path) -> None:
    assert_one_story(ending_in_process(project(tmp_path, BROKEN)), "Failure", error="no_such_table")


def test_upload_failure_after_the_models_landed(tmp_path: Path) -> None:
    state = (f'\n[state]\nbackend = "valkey"\nvalkey_url = "redis://127.0.0.1:{closed_port()}/0"\n'
             'on_upload_failure = "fail"\ntransfer_timeout_seconds = 2\n')
    end = ending_in_process(project(tmp_path, GOOD, state))
    assert end.doc["tables_copied"] == 1  # the data landed; the run still did not do what was asked
    assert_one_story(end, "Failure", error="the state was not uploaded to key")


def test_hook_abort_at_pipeline_start(tmp_path: Path) -> None:
    end = ending_in_process(project(tmp_path, GOOD, _hook("pipeline_start", "exit 3")))
    assert end.doc["tables_copied"] == 0
    assert_one_story(end, "Failure", error="aborted by hook on_pipeline_start[0]")


def test_hook_abort_midway(tmp_path: Path) -> None:
    models = {"a_first.sql": "select 1 as x\n", "zz_second.sql": "select 2 as x\n"}
    # fails for the second model only (its name is in the event context on stdin)
    hook = _hook("before_model_run", "grep -q zz_second && exit 1 || exit 0")
    end = ending_in_process(project(tmp_path, models, hook), "--parallel", "1")
    assert [m["asset_key"][-1] for m in end.doc["materializations"]] == ["a_first"]
    assert_one_story(end, "PartialFailure", error="aborted by hook on_before_model_run[0]")


@pytest.mark.parametrize("event", ["pipeline_start", "before_model_run", "pipeline_complete"])
def test_a_hook_abort_reads_as_the_published_run_output(tmp_path: Path, event: str) -> None:
    """CONTRACT section 3 has eight failure kinds and the published ``RunOutput`` rejects any other: an
    abort is ``unknown``, and ``cause: "hook-abort"`` (a field the published model ignores) and the
    message say what stopped the run, in the document and in the record alike."""
    end = ending_in_process(project(tmp_path, GOOD, _hook(event, "exit 7")))
    assert_one_story(end, "Failure", error=f"aborted by hook on_{event}[0] (exit) exited with code 7")
    run_schema.RunOutput.model_validate(end.doc)
    sdk.RunResult.model_validate(end.doc)
    assert end.record is not None and end.record.extra["errors"] == end.doc["errors"]
    [error] = end.doc["errors"]
    assert (error["failure_kind"], error["cause"]) == ("unknown", "hook-abort"), error


def _errors_fired(tmp_path: Path) -> tuple[str, Path]:
    """A ``pipeline_error`` hook that appends one line per firing to a file (to count them)."""
    fired = tmp_path / "pipeline_error.log"
    return _hook("pipeline_error", f"echo fired >> {fired}", on_failure="warn"), fired


def test_hook_abort_at_pipeline_complete_fails_the_run(tmp_path: Path) -> None:
    """An explicit ``abort`` after the work is not downgraded to a warning: the models landed, but the
    run is a Failure naming the hook (document first, exit 1, the record says so), ``pipeline_error``
    fires once, and the key is closed as failed so a retry runs."""
    on_error, fired = _errors_fired(tmp_path)
    config = project(tmp_path / "p", GOOD, _hook("pipeline_complete", "exit 3") + on_error)
    end = ending_in_process(config, "--idempotency-key", "nightly")
    assert end.doc["tables_copied"] == 1
    assert_one_story(end, "Failure", error="aborted by hook on_pipeline_complete[0]")
    assert end.record is not None
    kinds = [(e["failure_kind"], e["cause"]) for e in end.record.extra["errors"]]
    assert kinds == [("unknown", "hook-abort")]
    assert fired.read_text().splitlines() == ["fired"]
    with StateStore.open(store_of(config), writer=False) as store:
        entry = store.idempotency.get("nightly")
    assert entry is not None and entry.state == "failed"


def test_hook_warn_at_pipeline_complete_lets_the_run_stand(tmp_path: Path) -> None:
    end = ending_in_process(project(tmp_path, GOOD, _hook("pipeline_complete", "exit 3", "warn")))
    assert "hook on_pipeline_complete[0]" in end.stderr
    assert_one_story(end, "Success")


def test_state_error_after_the_models_landed(tmp_path: Path) -> None:
    """A RockyError that escapes the runner (here the watermark write, refused by the store after the
    model landed) is a recorded Failure naming it, document first, exit 1, ``pipeline_error`` once."""
    on_error, fired = _errors_fired(tmp_path)
    models = {"events.sql": "select 1 as id, timestamp '2026-01-01' as ts\n",
              "events.toml": '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n'}
    config = project(tmp_path / "p", models, on_error)
    assert ending_in_process(config).code == 0  # creates the store
    sqlite(store_of(config), "CREATE TRIGGER refuse BEFORE UPDATE ON watermarks "
                             "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    end = ending_in_process(config)
    assert_one_story(end, "Failure", error="refused by the test")
    assert end.record is not None and [e.model_name for e in end.record.models_executed] != []
    assert fired.read_text().splitlines() == ["fired"]


def test_failed_idempotency_finalize(tmp_path: Path) -> None:
    config = project(tmp_path, GOOD)
    assert ending_in_process(config).code == 0  # creates the store
    sqlite(store_of(config), "CREATE TRIGGER refuse BEFORE UPDATE ON idempotency_keys "
                             "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    end = ending_in_process(config, "--idempotency-key", "nightly")
    assert end.doc["tables_copied"] == 1
    assert_one_story(end, "Failure", error="could not finalize idempotency key 'nightly'")


# ---------------------------------------------------------------------------------------- signalled


@pytest.mark.slow
def test_sigint_before_anything_landed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    end = ending_of_signal(project(tmp_path / "p", GOOD, sleeping_hook(pids)), pids, signal.SIGINT)
    assert end.doc["tables_copied"] == 0
    assert_one_story(end, "Failure", interrupted=True)


@pytest.mark.slow
def test_sigterm_after_the_models_landed(tmp_path: Path) -> None:
    """All of its models landed, but the run was stopped before it finished: never a Success."""
    pids = tmp_path / "pids"
    pids.mkdir()
    config = project(tmp_path / "p", GOOD, sleeping_hook(pids, event="after_model_run"))
    end = ending_of_signal(config, pids, signal.SIGTERM)
    assert end.doc["tables_copied"] == 1
    assert_one_story(end, "PartialFailure", interrupted=True)
    # and `rocky history` (what an operator reads the next morning) says the same
    history = rocky_in_process(["-c", str(config), "history", "--output", "json"])
    [run] = json.loads(history.stdout)["runs"]
    assert (run["run_id"], run["status"], run["interrupted"]) == (end.doc["run_id"], "PartialFailure", True)


def _child(config: Path, submission: str, timeout: float | None = None) -> ChildRequest:
    return ChildRequest(
        pipeline="orders", config_path=config, state_path=store_of(config), trigger="schedule",
        submission_id=submission, timeout_seconds=timeout, cwd=config.parent,
        stdout_path=config.parent / "child.json",
    )


@pytest.mark.slow
def test_drain(tmp_path: Path) -> None:
    """What the drain of ``rocky serve`` (and a stopped tick) does to its child: ``terminate``."""
    pids = tmp_path / "pids"
    pids.mkdir()
    config = project(tmp_path / "p", GOOD, sleeping_hook(pids, event="after_model_run"))
    spawner = SubprocessSpawner(env=child_env(), kill_grace_seconds=120)

    def drain() -> None:
        wait_for_hook(pids)
        spawner.terminate(drained=True)

    drainer = threading.Thread(target=drain)
    drainer.start()
    result = spawner.run(_child(config, "d" * 32))
    drainer.join()
    assert result.drained
    assert_one_story(ending_of_child(config, result.exit_code, "d" * 32, config.parent / "child.json"),
                     "PartialFailure", interrupted=True)


@pytest.mark.slow
def test_timeout_minutes(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = project(tmp_path / "p", GOOD, sleeping_hook(pids, event="after_model_run"))
    # the spawner's clock jumps past the timeout once the hook runs (the handshake), so no test waits
    flag = pids / "sleep"
    spawner = SubprocessSpawner(env=child_env(), kill_grace_seconds=120,
                                clock=lambda: time.monotonic() + (10_000.0 if flag.exists() else 0.0))
    result = spawner.run(_child(config, "t" * 32, timeout=3600))
    assert result.timed_out
    assert_one_story(ending_of_child(config, result.exit_code, "t" * 32, config.parent / "child.json"),
                     "PartialFailure", interrupted=True)
