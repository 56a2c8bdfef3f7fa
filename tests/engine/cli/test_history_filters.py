"""``rocky history --status / --trigger / --pipeline``, its terminal styles and its Markdown (issue 13).

The filters are applied in the query, before the 50-run window: a project whose manual runs are far more
frequent still shows its scheduled runs. A value that cannot match is a one-line error naming the valid
ones. On a terminal, failed, partial and interrupted runs stand out (rich styles; rich is never imported
when the output is piped); ``--output md`` is a Slack-ready list, as for ``rocky brief``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rocky_engine.state import RunRecord, StateStore
from tests.engine.cli.test_history import _run as daily_run
from tests.fixtures.inprocess import InProcess, rocky_in_process
from tests.fixtures.projects import ROCKY, TRANSFORMATION_TOML, child_env, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def _run(i: int, **fields: Any) -> RunRecord:
    """test_history's run record, ``i`` minutes (not days) after 08:00, 30 s long."""
    start = T0 + timedelta(minutes=i)
    values: dict[str, Any] = {
        "run_id": f"run-20260301-{8 + i // 60:02d}{i % 60:02d}00-000",
        "started_at": start,
        "finished_at": start + timedelta(seconds=30),
        **fields,
    }
    return daily_run(0, **values)


def _project(root: Path, records: list[RunRecord]) -> Path:
    config = root / "rocky.toml"
    config.write_text(TRANSFORMATION_TOML.format(pipeline="orders"))
    (root / "models").mkdir()
    with StateStore.open(root / "models" / ".rocky-state.db") as store:
        store.runs.insert_many(records)
    return config


def _history(config: Path, *args: str) -> InProcess:
    return rocky_in_process(["-c", str(config), "history", *args, "--output", "json"])


def _ids(result: InProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [r["run_id"] for r in json.loads(result.stdout)["runs"]]


#: five scheduled runs, then sixty manual ones: the newest 50 are all manual
BUSY = [_run(i, trigger="Schedule") for i in range(5)] + [_run(5 + i) for i in range(60)]


def test_trigger_filters_before_the_window(tmp_path: Path) -> None:
    config = _project(tmp_path, BUSY)
    assert "Schedule" not in {r["trigger"] for r in json.loads(_history(config).stdout)["runs"]}
    scheduled = _ids(_history(config, "--trigger", "Schedule"))
    assert scheduled == [r.run_id for r in reversed(BUSY[:5])]
    assert len(_ids(_history(config, "--trigger", "manual"))) == 50  # the cap still holds, case-insensitive
    assert len(_ids(_history(config, "--trigger", "Manual,Schedule"))) == 50


def test_status_and_pipeline_filters(tmp_path: Path) -> None:
    records = [
        _run(0, status="Failure"),
        _run(1, status="PartialFailure", pipeline="raw"),
        _run(2, status="Failure", pipeline="gone", interrupted=True),  # a pipeline since removed
        *[_run(3 + i) for i in range(60)],
    ]
    config = _project(tmp_path, records)
    failed = ["run-20260301-080200-000", "run-20260301-080000-000"]
    assert _ids(_history(config, "--status", "Failure")) == failed
    assert _ids(_history(config, "--status", "failure", "--status", "PARTIALFAILURE")) == [
        "run-20260301-080200-000", "run-20260301-080100-000", "run-20260301-080000-000",
    ]
    assert _ids(_history(config, "--pipeline", "raw")) == ["run-20260301-080100-000"]
    assert _ids(_history(config, "--pipeline", "gone", "--status", "Failure")) == ["run-20260301-080200-000"]
    assert _ids(_history(config, "--pipeline", "orders", "--status", "PartialFailure")) == []
    [gone] = json.loads(_history(config, "--pipeline", "gone").stdout)["runs"]
    assert gone["interrupted"] is True
    assert "interrupted" not in json.loads(_history(config, "--pipeline", "raw").stdout)["runs"][0]


def test_a_trigger_recorded_from_rocky_run_trigger_is_accepted(tmp_path: Path) -> None:
    config = _project(tmp_path, [_run(0, trigger="Airflow"), _run(1)])
    assert _ids(_history(config, "--trigger", "airflow")) == ["run-20260301-080000-000"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "failed"], "error: unknown --status 'failed'; valid statuses: Success, PartialFailure, "
                                 "Failure"),
        (["--status", "Success,nope"], "error: unknown --status 'nope'; valid statuses: "),
        (["--trigger", "cron"], "error: unknown --trigger 'cron'; valid triggers: Manual, Schedule, Webhook, "
                                "Sensor, Ci"),
        (["--pipeline", "ordres"], "error: unknown pipeline 'ordres' for --pipeline; pipelines configured or "
                                   "with recorded runs: orders"),
    ],
)
def test_a_filter_that_cannot_match_is_one_line_listing_the_valid_values(
    tmp_path: Path, args: list[str], message: str
) -> None:
    config = _project(tmp_path, [_run(0)])
    result = _history(config, *args)
    assert result.returncode == 1 and result.stdout == ""
    assert result.error_lines == [line for line in result.stderr.splitlines() if line]
    [line] = result.error_lines
    assert line.startswith(message), line


def test_model_history_takes_the_filters(tmp_path: Path) -> None:
    from rocky_engine.state import ModelExecution

    def with_model(i: int, **fields: Any) -> RunRecord:
        run = _run(i, **fields)
        run.models_executed = [ModelExecution(model_name="m", started_at=run.started_at, status="success")]
        return run

    config = _project(tmp_path, [with_model(0, trigger="Schedule"), with_model(1)])
    doc = json.loads(_history(config, "--model", "m", "--trigger", "Schedule").stdout)
    assert [e["run_id"] for e in doc["executions"]] == ["run-20260301-080000-000"]


def test_markdown_is_a_slack_ready_list_with_the_bad_runs_first_in_words(tmp_path: Path) -> None:
    config = _project(
        tmp_path,
        [_run(0), _run(1, status="PartialFailure"), _run(2, status="Failure", interrupted=True)],
    )
    result = rocky_in_process(["-c", str(config), "history", "--output", "md"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "*Rocky history* · 3 run(s), newest first · 1 failed, 1 partial, 1 interrupted",
        "- *FAILED, INTERRUPTED* `orders` `run-20260301-080200-000` at 2026-03-01 08:02 UTC · 30.0s · "
        "Manual · 0 model(s)",
        "- *PARTIAL* `orders` `run-20260301-080100-000` at 2026-03-01 08:01 UTC · 30.0s · Manual · "
        "0 model(s)",
        "- success `orders` `run-20260301-080000-000` at 2026-03-01 08:00 UTC · 30.0s · Manual · 0 model(s)",
    ]
    filtered = rocky_in_process(["-c", str(config), "history", "--status", "Failure", "--output", "md"])
    assert filtered.stdout.splitlines()[0] == (
        "*Rocky history* · 1 run(s), newest first · 1 failed, 1 interrupted · status Failure"
    )
    none = rocky_in_process(["-c", str(config), "history", "--pipeline", "orders", "--status", "Success",
                             "--trigger", "Ci", "--output", "md"])
    assert none.stdout.splitlines()[1] == "- no runs match"


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """stdout of a real ``rocky`` whose stdout is a pseudo-terminal (a person watching)."""
    primary, secondary = pty.openpty()
    env = child_env({"TERM": "xterm-256color", "COLUMNS": "200"})
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([*ROCKY, *args], cwd=cwd, env=env, stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        assert ready, "rocky history printed nothing on the terminal for 60 s"
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed the terminal (EIO)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode()


@pytest.mark.slow
def test_on_a_terminal_failed_partial_and_interrupted_runs_stand_out(tmp_path: Path) -> None:
    config = _project(
        tmp_path,
        [_run(0), _run(1, status="PartialFailure"), _run(2, status="Failure"),
         _run(3, status="Failure", interrupted=True)],
    )
    screen = _on_a_terminal(["-c", str(config), "history"], tmp_path)
    lines = {line.split("run-", 1)[1][:19]: line for line in screen.splitlines() if "run-2026" in line}
    red, yellow, magenta = "\x1b[1;31m", "\x1b[33m", "\x1b[1;35m"
    assert red in lines["20260301-080200-000"]
    assert yellow in lines["20260301-080100-000"]
    assert magenta in lines["20260301-080300-000"] and "Failure (interrupted)" in lines["20260301-080300-000"]
    assert "\x1b[" not in lines["20260301-080000-000"].replace("\x1b[0m", "")  # a success is plain

    piped = run_rocky(["-c", str(config), "history", "--output", "table"], cwd=tmp_path)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout
    assert "Failure (interrupted)" in piped.stdout


def test_rich_is_not_imported_when_the_table_is_piped(tmp_path: Path) -> None:
    config = _project(tmp_path, [_run(0, status="Failure")])
    probe = (
        "import sys\n"
        "from rocky_engine.cli.main import run_cli\n"
        f"code = run_cli(['-c', {str(config)!r}, 'history', '--output', 'table'])\n"
        "sys.stderr.write(f'PROBE code={code} rich={\"rich\" in sys.modules}\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "PROBE code=0 rich=False" in proc.stderr, proc.stderr


def test_help_documents_the_filters() -> None:
    result = rocky_in_process(["history", "--help"])
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for words in ("--status STATUS", "Success, PartialFailure or Failure", "--trigger TRIGGER",
                  "Manual, Schedule, Webhook, Sensor or Ci", "--pipeline NAME", "before the 50 are taken",
                  "--output md"):
        assert words in text, words
