"""A damaged state store and a full disk are one-line errors, never tracebacks (issue 13 item 13).

Random corruption of a state file gave "internal error" on every command, doctor included: SQLite's own
checks pass a file whose text cells were overwritten, and the engine then met a timestamp, a JSON value or
a UTF-8 sequence it could not parse. Now each command says ``state store at P is damaged: ...`` with the
``mv P P.corrupt`` fix, and ``rocky doctor`` reports it as a Critical ``state`` finding (exit 3). A full
disk under the store says "no space left on <directory>", not SQLite's "disk I/O error".
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state import RunRecord, StateStore
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import TRANSFORMATION_TOML, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

RUNS = {"history", "brief", "doctor"}
#: what is damaged -> (the SQL that damages it, the commands that read it and so must report it)
DAMAGE = {
    "a timestamp": ("UPDATE run_history SET started_at = '20d6-03-01T08:00:00.000000Z'", RUNS),
    "a JSON column": ("UPDATE run_history SET models_executed = '[{\"model_name\": '", RUNS),
    "text that is not UTF-8": ("UPDATE run_history SET status = CAST(x'53ff9c' AS TEXT)", RUNS),
    "a watermark's time": ("UPDATE watermarks SET updated_at = 'yesterday'", {"state", "doctor"}),
    "a schedule cursor": (
        "UPDATE schedule_state SET cron_anchor = '2026-13-45T99:00:00Z'", {"tick", "tick --dry-run", "doctor"}
    ),
}

#: every command that reads the store (argv after -c CONFIG)
COMMANDS = [
    ["history"],
    ["state"],
    ["tick", "--dry-run"],
    ["tick"],
    ["brief", "--since", "7d", "--now", "2026-03-01T09:00:00Z"],
    ["doctor"],
]


def _project(root: Path, state_path: Path | None = None) -> tuple[Path, Path]:
    config = root / "rocky.toml"
    config.write_text(
        TRANSFORMATION_TOML.format(pipeline="models") + '\n[pipeline.models.schedule]\ncron = "0 * * * *"\n'
    )
    (root / "models").mkdir(exist_ok=True)
    (root / "models" / "m.sql").write_text("select 1 as a\n")
    store = state_path or root / "models" / ".rocky-state.db"
    with StateStore.open(store) as s:
        s.runs.insert(
            RunRecord(
                run_id="run-20260301-080000-000", pipeline="models", started_at=T0,
                finished_at=T0 + timedelta(seconds=1), status="Success",
            )
        )
        s.watermarks.set("wh.raw.orders", "17", now=T0)
        with s.transaction() as conn:
            conn.execute(
                "INSERT INTO schedule_state (pipeline, cron, timezone, cron_anchor) "
                "VALUES ('models', '0 * * * *', 'UTC', '2026-03-01T08:00:00.000000Z')"
            )
    return config, store


def _damage(store: Path, sql: str) -> None:
    conn = sqlite3.connect(store)
    try:
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _assert_one_line_naming_the_fix(stderr: str, store: Path) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert errors[0].startswith(f"error: state store at {store} is damaged: "), errors[0]
    assert f"mv {store} {store}.corrupt" in errors[0]
    assert "internal error" not in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_value_is_one_line_in_every_command_and_critical_in_doctor(
    tmp_path: Path, damage: str
) -> None:
    config, store = _project(tmp_path)
    sql, readers = DAMAGE[damage]
    _damage(store, sql)
    for argv in COMMANDS:
        name = " ".join(argv[:2]) if argv[:2] == ["tick", "--dry-run"] else argv[0]
        result = rocky_in_process(["-c", str(config), *argv, "--output", "json"])
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
        if name not in readers:
            # a command that never reads the damaged value works as before
            assert result.returncode == 0, (argv, result.stderr)
        elif name == "doctor":
            assert result.returncode == 3, result.stdout
            doc = json.loads(result.stdout)
            [state] = [c for c in doc["checks"] if c["name"] == "state"]
            assert state["status"] == "critical", state
            assert state["message"].startswith(f"state store at {store} is damaged: ")
            assert f"mv {store} {store}.corrupt" in " ".join(doc["suggestions"])
        else:
            assert result.returncode == 1, (argv, result.stdout, result.stderr)
            _assert_one_line_naming_the_fix(result.stderr, store)


def test_a_real_rocky_history_on_a_damaged_store(tmp_path: Path) -> None:
    config, store = _project(tmp_path)
    _damage(store, DAMAGE["a timestamp"][0])
    result = run_rocky(["-c", str(config), "history"], cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    _assert_one_line_naming_the_fix(result.stderr, store)


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs mounted for the test (root only; skipped where mounting is not allowed)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> None:
    """Write a file until the filesystem refuses another byte."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 512)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return
    finally:
        os.close(fd)


@pytest.mark.slow
def test_a_full_disk_says_no_space_left_not_disk_io_error(tmp_path: Path, tiny_filesystem: Path) -> None:
    store = tiny_filesystem / "state.db"
    config, _ = _project(tmp_path, state_path=store)
    _fill(tiny_filesystem)
    flags = ["-c", str(config), "--state-path", str(store)]
    for argv in (["run"], ["history"], ["tick"]):
        result = run_rocky([*flags, *argv, "--output", "json"], cwd=tmp_path)
        assert result.returncode == 1, (argv, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr
        assert errors[0].startswith(f"error: no space left on {tiny_filesystem} "), errors[0]
        assert "disk I/O error" not in result.stderr and "internal error" not in result.stderr
    doctor = run_rocky([*flags, "doctor", "--check", "state", "--output", "json"], cwd=tmp_path)
    assert doctor.returncode == 3
    [check] = json.loads(doctor.stdout)["checks"]
    assert check["status"] == "critical"
    assert check["message"].startswith(f"no space left on {tiny_filesystem}")
    (tiny_filesystem / "filler").unlink()
    again = run_rocky([*flags, "history", "--output", "json"], cwd=tmp_path)
    assert again.returncode == 0 and "run-20260301-080000-000" in again.stdout
