"""The CLI frame: help, usage errors, global flags after the command, lazy heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROCKY = [sys.executable, "-m", "rocky_engine.cli.main"]
HEAVY = ("duckdb", "pyarrow", "httpx", "starlette", "uvicorn", "rich")


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROCKY, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_help_lists_commands_and_exit_codes() -> None:
    proc = _run("--help")
    assert proc.returncode == 0
    assert "run" in proc.stdout and "validate" in proc.stdout and "history" in proc.stdout
    assert "130 interrupted" in proc.stdout


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from rocky_engine.cli.main import build_parser\n"
        "build_parser()\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_unknown_command_exits_1_not_2() -> None:
    proc = _run("frobnicate")
    assert proc.returncode == 1
    assert "invalid choice" in proc.stderr


def test_bad_flag_exits_1() -> None:
    proc = _run("run", "--no-such-flag")
    assert proc.returncode == 1
    assert "unrecognized arguments: --no-such-flag" in proc.stderr


def test_version() -> None:
    proc = _run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("rocky ")


def test_missing_config_is_one_line_error(tmp_path: Path) -> None:
    proc = _run("-c", str(tmp_path / "nope.toml"), "run", "--output", "json")
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ")
    assert "nope.toml" in lines[-1]
    assert "Traceback" not in proc.stderr


def test_global_flags_accepted_after_command(tmp_path: Path) -> None:
    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "duckdb"\npath = "w.duckdb"\n\n'
        '[pipeline.m]\ntype = "transformation"\nmodels = "models/**"\n'
    )
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("SELECT 1 AS x\n")
    proc = _run("run", "-c", str(tmp_path / "rocky.toml"), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == "run"
    assert doc["status"] == "Success"
    assert proc.stdout.endswith("}\n")
