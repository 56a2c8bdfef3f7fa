"""RockyResource: every outcome of an engine invocation, against the real binary where possible.

Stand-in scripts replace the binary only where the subject is the resource's own subprocess handling
(timeouts, exit codes, unparseable output); everything else runs the real ``rocky``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from dagster_rocky import RockyResource, RunResult, _process
from dagster_rocky.resource import PREVIEW_CHARS
from tests.fixtures.processes import pid_alive

RUN_JSON = {
    "version": "0.1.0",
    "command": "run",
    "status": "PartialFailure",
    "filter": "",
    "duration_ms": 12,
    "tables_copied": 1,
    "tables_failed": 1,
    "materializations": [
        {
            "asset_key": ["duckdb", "orders", "orders"],
            "duration_ms": 3,
            "rows_copied": 5,
            "metadata": {"strategy": "incremental", "target_table_full_name": "wh.stg.orders"},
        }
    ],
    "check_results": [],
    "execution": {"concurrency": 4, "tables_processed": 2, "tables_failed": 1},
    "metrics": None,
    "permissions": {"grants_added": 0, "grants_revoked": 0, "catalogs_created": 0, "schemas_created": 0},
    "drift": {"tables_checked": 0, "tables_drifted": 0, "actions_taken": []},
    "interrupted": False,
    "errors": [
        {"asset_key": ["duckdb", "orders", "items"], "error": "boom", "failure_kind": "query-rejected"}
    ],
    "some_future_field": {"ignored": True},
}


def test_construction_does_no_io() -> None:
    rocky = RockyResource(binary_path="/definitely/not/here/rocky", config_path="/nope/rocky.toml")
    assert rocky.timeout_seconds == 3600
    assert (rocky.binary_path, rocky.config_path, rocky.state_path, rocky.models_dir) == (
        "/definitely/not/here/rocky",
        "/nope/rocky.toml",
        None,
        "models",
    )


def test_missing_binary_path_is_a_failure_naming_the_fix() -> None:
    rocky = RockyResource(binary_path="/definitely/not/here/rocky")
    with pytest.raises(dg.Failure) as err:
        rocky.discover()
    assert "rocky binary '/definitely/not/here/rocky' was not found" in str(err.value.description)
    assert "binary_path" in str(err.value.description)
    assert err.value.allow_retries is False


def test_missing_binary_name_on_path_is_a_failure() -> None:
    rocky = RockyResource(binary_path="rocky-binary-that-does-not-exist")
    with pytest.raises(dg.Failure, match="rocky-binary-that-does-not-exist' was not found"):
        rocky.run()


def test_binary_found_next_to_python_when_not_on_path(
    monkeypatch: pytest.MonkeyPatch, rocky_bin: str
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert RockyResource().resolve_binary() == rocky_bin


def test_timeout_kills_the_whole_process_group(
    stand_in: Callable[[str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "KILL_GRACE_SECONDS", 0.5)
    pids = tmp_path / "pids"
    # The child ignores SIGTERM (so SIGKILL is needed) and has a grandchild that would outlive it.
    script = stand_in(
        f"""
        trap '' TERM
        sleep 60 &
        echo $$ $! > {pids}
        echo "starting" >&2
        while true; do sleep 0.1; done
        """
    )
    rocky = RockyResource(binary_path=script, timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(dg.Failure) as err:
        rocky.run(pipeline="raw")
    elapsed = time.monotonic() - started
    assert elapsed < 10
    failure = err.value
    assert failure.allow_retries is False
    assert "did not finish within timeout_seconds=1" in str(failure.description)
    assert failure.metadata["timed_out"].value is True
    assert "starting" in failure.metadata["stderr_preview"].value
    child, grandchild = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (pid_alive(child) or pid_alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)
    assert not pid_alive(grandchild)


def test_unparseable_output_is_a_failure_with_previews(stand_in: Callable[[str], str]) -> None:
    script = stand_in('echo "hello from a wrapper"\necho "some log" >&2\nexit 0\n')
    with pytest.raises(dg.Failure) as err:
        RockyResource(binary_path=script).discover()
    failure = err.value
    assert "exited 0 but its stdout is not a JSON discover document" in str(failure.description)
    assert failure.metadata["stdout_preview"].value.strip() == "hello from a wrapper"
    assert failure.metadata["stderr_preview"].value.strip() == "some log"
    assert failure.metadata["exit_code"].value == 0


def test_valid_json_of_the_wrong_shape_exit_0_is_a_failure(stand_in: Callable[[str], str]) -> None:
    script = stand_in("""echo '{"command": "run", "materializations": "not a list"}'\n""")
    with pytest.raises(dg.Failure, match="printed a run document this integration cannot read"):
        RockyResource(binary_path=script).run()


def test_exit_2_partial_success_is_returned(stand_in: Callable[[str], str], tmp_path: Path) -> None:
    doc = tmp_path / "run.json"
    doc.write_text(json.dumps(RUN_JSON))
    script = stand_in(f"cat {doc}\nexit 2\n")
    result = RockyResource(binary_path=script).run("id=orders", pipeline="raw")
    assert isinstance(result, RunResult)
    assert result.status == "PartialFailure"
    assert result.materializations[0].rows_copied == 5
    assert result.errors[0].failure_kind == "query-rejected"


def test_exit_1_with_json_is_returned(stand_in: Callable[[str], str], tmp_path: Path) -> None:
    doc = tmp_path / "run.json"
    doc.write_text(json.dumps({**RUN_JSON, "status": "Failure", "tables_copied": 0, "materializations": []}))
    script = stand_in(f"cat {doc}\necho 'error: every table failed' >&2\nexit 1\n")
    result = RockyResource(binary_path=script).run()
    assert result.status == "Failure"
    assert not result.succeeded


def test_hard_failure_caps_previews(stand_in: Callable[[str], str]) -> None:
    # 100 000 characters on each stream: the failure keeps head and tail, capped.
    script = stand_in(
        """
        python3 -c "print('o' * 100000)"
        python3 -c "import sys; sys.stderr.write('e' * 100000 + '\\nerror: the real reason\\n')"
        exit 1
        """
    )
    with pytest.raises(dg.Failure) as err:
        RockyResource(binary_path=script).run()
    failure = err.value
    assert "failed with exit code 1: error: the real reason" in str(failure.description)
    stdout_preview = failure.metadata["stdout_preview"].value
    stderr_preview = failure.metadata["stderr_preview"].value
    assert len(stdout_preview) < PREVIEW_CHARS + 100
    assert "characters cut" in stdout_preview
    assert stderr_preview.rstrip().endswith("error: the real reason")
    assert failure.allow_retries is True


def test_real_engine_hard_failure(rocky_bin: str, tmp_path: Path) -> None:
    rocky = RockyResource(config_path=str(tmp_path / "missing.toml"))
    with pytest.raises(dg.Failure) as err:
        rocky.run()
    assert "failed with exit code 1: error: config file not found" in str(err.value.description)
    assert err.value.metadata["exit_code"].value == 1


def test_real_engine_run_on_the_playground(playground: Path) -> None:
    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    assert rocky.run(pipeline="raw").status == "Success"  # the models read the replicated tables
    result = rocky.run(pipeline="models")
    assert result.status == "Success"
    assert result.run_id and result.run_id.startswith("run-")
    keys = {tuple(m.asset_key) for m in result.materializations}
    assert ("playground", "marts", "fct_orders") in keys
    history = rocky.history()
    assert history.runs and history.runs[0].run_id == result.run_id
    assert history.count == len(history.runs) == 2
    # with a model, the executions of that model (rocky history --model prints a document of its own)
    executions = rocky.history(model="fct_orders")
    [execution] = executions.executions
    assert executions.model == "fct_orders" and executions.count == 1
    assert execution.run_id == result.run_id and execution.status == "success"
    fct = next(m for m in result.materializations if m.asset_key[-1] == "fct_orders")
    assert execution.sql_hash == fct.metadata.sql_hash and execution.rows_affected == fct.rows_copied


def test_run_streaming_sends_engine_stderr_to_the_step_log(
    stand_in: Callable[[str], str], tmp_path: Path
) -> None:
    doc = tmp_path / "run.json"
    doc.write_text(json.dumps({**RUN_JSON, "status": "Success", "errors": []}))
    script = stand_in(
        f"""
        echo '{{"ts": "x", "level": "info", "target": "rocky.run", "message": "copying 2 tables"}}' >&2
        echo '{{"level": "warning", "target": "rocky.run", "message": "schema drift on orders"}}' >&2
        echo 'plain text line' >&2
        cat {doc}
        """
    )

    @dg.asset
    def rocky_models(context, rocky: RockyResource) -> dg.MaterializeResult:  # type: ignore[no-untyped-def]
        result = rocky.run_streaming(context, pipeline="raw")
        return dg.MaterializeResult(metadata={"status": result.status})

    instance = dg.DagsterInstance.ephemeral()
    res = dg.materialize(
        [rocky_models], resources={"rocky": RockyResource(binary_path=script)}, instance=instance
    )
    assert res.success
    lines = {
        e.user_message: e.level for e in instance.all_logs(res.run_id) if e.user_message.startswith("[rocky]")
    }
    assert lines == {
        "[rocky] copying 2 tables": logging.INFO,
        "[rocky] schema drift on orders": logging.WARNING,
        "[rocky] plain text line": logging.INFO,
    }


def test_stderr_callback_errors_never_break_the_run(stand_in: Callable[[str], str]) -> None:
    script = stand_in('echo "line" >&2\necho \'{"command": "doctor", "overall": "healthy"}\'\n')

    def broken(_line: str) -> None:
        raise RuntimeError("logger exploded")

    outcome = _process.run_cli([script], timeout_seconds=10, on_stderr_line=broken)
    assert outcome.returncode == 0
    assert "doctor" in outcome.stdout


def test_doctor_on_the_playground(playground: Path) -> None:
    report = RockyResource(config_path=str(playground / "rocky.toml")).doctor()
    names = {c.name for c in report.checks}
    assert {"config", "state", "adapters"} <= names
    assert report.overall in ("healthy", "warning")
    assert not report.critical
    only = RockyResource(config_path=str(playground / "rocky.toml")).doctor(check="config")
    assert [c.name for c in only.checks] == ["config"]


def test_doctor_critical_exit_3_is_a_result(stand_in: Callable[[str], str]) -> None:
    doc = '{"command": "doctor", "overall": "critical", "checks": [{"name": "state", "status": "critical"}]}'
    script = stand_in(f"echo '{doc}'\nexit 3\n")
    report = RockyResource(binary_path=script).doctor()
    assert report.critical


def test_runs_started_by_a_sensor_are_recorded_as_sensor_triggered(playground: Path) -> None:
    @dg.asset
    def replicate(context, rocky: RockyResource) -> None:  # type: ignore[no-untyped-def]
        assert rocky.run_streaming(context, pipeline="raw").succeeded

    rocky = RockyResource(config_path=str(playground / "rocky.toml"))
    result = dg.materialize(
        [replicate], resources={"rocky": rocky}, tags={"rocky/sensor": "rocky_source_sensor"}
    )
    assert result.success
    (run,) = rocky.history().runs
    assert (run.trigger, run.submission_id) == ("Sensor", result.run_id)
