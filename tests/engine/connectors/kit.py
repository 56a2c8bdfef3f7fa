"""Test kit for child connectors: a project with one connector whose program is ``fake_connector.py``, run
through a real ``rocky`` subprocess (or in process where a clock must be injected)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.fixtures import projects
from tests.fixtures.projects import child_env, duckdb_query, popen_rocky, run_rocky

PROGRAM = Path(__file__).with_name("fake_connector.py")

CONFIG = """\
[adapter.default]
type = "duckdb"
path = "wh.duckdb"

[connector.{name}]
manifest = "conn/connector.toml"
output_uri = "file://./landing"
secrets = {secrets}
target = {{ catalog = "wh", schema = "raw", table = "events" }}
retries = {retries}
keep_scratch = {keep}
{extra}
"""

MANIFEST = """\
protocol_version = 0
name = "fake"
command = {command}
state_schema_version = {state_version}
egress_hosts = ["api.example.com"]
{extra}
"""


@dataclass
class Cli(projects.Cli):
    @property
    def connector(self) -> dict[str, Any]:
        value: dict[str, Any] = self.json["connector"]
        return value


@dataclass
class ConnectorProject:
    """``rocky.toml`` + ``conn/connector.toml`` + ``conn/prog.py`` + warehouse ``wh.duckdb`` (catalog wh)."""

    root: Path
    name: str = "fake"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.root / "rocky.toml"

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def state_path(self) -> Path:
        return self.root / ".rocky-state.db"

    @property
    def marker(self) -> Path:
        return self.root / "marker"

    def setup(
        self,
        mode: str = "ok",
        *args: str,
        retries: int = 0,
        secrets: list[str] | None = None,
        keep_scratch: bool = False,
        extra: str = "",
        manifest_extra: str = "",
        state_version: int = 1,
        wrapper: bool = False,
    ) -> ConnectorProject:
        """With ``wrapper``, the manifest's command is a shell script that runs the program as its child
        (no ``exec``), as many deployed connectors do."""
        conn = self.root / "conn"
        conn.mkdir(exist_ok=True)
        program = conn / "prog.py"
        program.write_text(f"#!{sys.executable}\n" + PROGRAM.read_text())
        program.chmod(0o755)
        entry = "./prog.py"
        if wrapper:
            script = conn / "wrapper.sh"
            script.write_text(f'#!/bin/sh\n"{program}" "$@"\necho "the program exited with $?" >&2\n')
            script.chmod(0o755)
            entry = "./wrapper.sh"
        command = json.dumps([entry, mode, *args])
        (conn / "connector.toml").write_text(MANIFEST.format(
            command=command, state_version=state_version, extra=textwrap.dedent(manifest_extra)))
        self.config.write_text(CONFIG.format(
            name=self.name, secrets=json.dumps(secrets or []), retries=retries,
            keep=str(keep_scratch).lower(), extra=textwrap.dedent(extra)))
        return self

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
        done = run_rocky(["-c", str(self.config), "--output", "json", *args], cwd=self.root,
                         env={**self.env, **(env or {})}, timeout=timeout)
        return Cli(done.returncode, done.stdout, done.stderr)

    def load(self, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
        return self.cli("load", "--connector", self.name, env=env, timeout=timeout)

    def popen(self, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return popen_rocky(["-c", str(self.config), "--output", "json", "load", "--connector", self.name],
                           cwd=self.root, env={**self.env, **(env or {})})

    def load_in_process(self, clock: Callable[[], datetime] | None = None) -> Any:
        from rocky_engine.connectors.connector_run import execute_connector_load
        from rocky_engine.project import load_project

        env = child_env(self.env)
        project = load_project(self.config, env=env)
        if clock is None:
            return execute_connector_load(project, self.name, env=env)
        return execute_connector_load(project, self.name, env=env, clock=clock)

    def rows(self, sql: str = "SELECT count(*) FROM wh.raw.events") -> list[tuple[Any, ...]]:
        return duckdb_query(self.root / "wh.duckdb", sql)

    def count(self) -> int:
        return int(self.rows()[0][0])

    def relations(self) -> list[str]:
        rows = self.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'raw' "
                         "ORDER BY 1")
        return [str(r[0]) for r in rows]

    def state(self) -> dict[str, Any] | None:
        if not self.state_path.exists():
            return None
        con = sqlite3.connect(self.state_path)
        try:
            con.row_factory = sqlite3.Row
            row = con.execute("SELECT * FROM connector_state WHERE name = ?", (self.name,)).fetchone()
            return dict(row) if row is not None else None
        finally:
            con.close()

    def claims(self) -> dict[str, dict[str, Any]]:
        con = sqlite3.connect(self.state_path)
        try:
            con.row_factory = sqlite3.Row
            rows = con.execute("SELECT * FROM idempotency_keys").fetchall()
            return {r["key"]: dict(r) for r in rows}
        finally:
            con.close()

    def scratch_dirs(self) -> list[Path]:
        return sorted(self.landing.iterdir()) if self.landing.exists() else []
