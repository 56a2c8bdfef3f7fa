"""The CLI frame: help, usage errors, global flags after the command, lazy heavy imports."""

from __future__ import annotations

import json
import os
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


def test_help_and_usage_errors_import_no_pydantic() -> None:
    code = (
        "import sys\n"
        "from rocky_engine.cli.main import run_cli\n"
        "for argv in (['--help'], ['frobnicate'], ['tick', '--help']):\n"
        "    try:\n"
        "        run_cli(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "loaded = [m for m in ('pydantic', 'logging') if m in sys.modules]\n"
        "sys.stderr.write(f'LOADED={loaded!r}\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED=[]" in proc.stderr.splitlines(), proc.stderr


_EXIT_PROBE = (
    "import atexit, gc, os, sys\n"
    "from rocky_engine.cli.main import {entry}\n"
    "def probe():\n"
    "    env, frozen = os.environ.get('PYDANTIC_DISABLE_PLUGINS'), gc.get_freeze_count() > 0\n"
    "    sys.stderr.write(f'PROBE env={{env}} frozen={{frozen}}\\n')\n"
    "atexit.register(probe)\n"
    "code = {entry}({argv!r})\n"
)


def _probe(entry: str, argv: list[str], env: dict[str, str] | None = None) -> str:
    full = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | (env or {})
    proc = subprocess.run(
        [sys.executable, "-c", _EXIT_PROBE.format(entry=entry, argv=argv)],
        capture_output=True, text=True, timeout=60, env=full,
    )
    return next(line for line in proc.stderr.splitlines() if line.startswith("PROBE "))


def test_entry_point_tunes_only_its_own_process(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    config.write_text('[adapter]\ntype = "duckdb"\npath = "w.duckdb"\n')
    validate = ["-c", str(config), "validate", "--output", "json"]
    # main: plugin discovery off unless the user chose, and every command skips the exit-time collection
    assert _probe("main", validate) == "PROBE env=__all__ frozen=True"
    assert _probe("main", validate, {"PYDANTIC_DISABLE_PLUGINS": "x"}) == "PROBE env=x frozen=True"
    assert _probe("main", ["-c", str(tmp_path / "no.toml"), "run"]) == "PROBE env=__all__ frozen=True"
    # run_cli (tests, embedders): neither the environment nor the collector is touched
    assert _probe("run_cli", validate) == "PROBE env=None frozen=False"
