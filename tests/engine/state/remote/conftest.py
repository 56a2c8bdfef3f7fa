"""Shared pieces of the remote-state tests: ``[state]`` configs for each backend on the real servers, and
"machines": a project directory with its own DuckDB warehouse and state file, all sharing one remote."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from rocky_engine.config.sections import StateConfig
from tests.fixtures.projects import TRANSFORMATION_TOML, Cli, popen_rocky, run_rocky
from tests.fixtures.redis import RedisServer
from tests.fixtures.s3 import AWS_ENV, S3Server


@dataclass
class Remote:
    """Where the remote state of a test lives, as ``[state]`` keys and as a handle to look inside."""

    backend: str
    s3: S3Server | None = None
    s3_prefix: str | None = None
    redis: RedisServer | None = None
    redis_prefix: str | None = None

    @property
    def snapshot_key(self) -> str:
        return f"{self.s3_prefix}state.sqlite"

    def state_toml(self, **extra: Any) -> str:
        """The ``[state]`` table for rocky.toml."""
        keys: dict[str, Any] = {"backend": self.backend}
        if self.s3 is not None:
            keys.update(
                s3_bucket=self.s3.bucket, s3_prefix=self.s3_prefix, s3_endpoint_url=self.s3.endpoint_url
            )
        if self.redis is not None:
            keys.update(valkey_url=self.redis.url, valkey_prefix=self.redis_prefix)
        keys.update(extra)
        body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())
        return f"[state]\n{body}\n"

    def config(self, **extra: Any) -> StateConfig:
        return StateConfig.model_validate(_toml_values(self.state_toml(**extra)))

    def snapshot(self) -> bytes | None:
        """The uploaded snapshot's bytes (from the durable tier on tiered)."""
        if self.s3 is not None:
            return self.s3.get(self.s3.bucket, self.snapshot_key)
        assert self.redis is not None
        raw = self.redis.client().get(f"{self.redis_prefix}state.sqlite")
        return None if raw is None else bytes(raw)

    def generation(self) -> str | None:
        if self.s3 is not None:
            return self.s3.etag(self.s3.bucket, self.snapshot_key)
        data = self.snapshot()
        import hashlib

        return None if data is None else hashlib.sha1(data).hexdigest()

    def put_snapshot(self, data: bytes) -> None:
        if self.s3 is not None:
            self.s3.put(self.s3.bucket, self.snapshot_key, data)
        else:
            assert self.redis is not None
            self.redis.client().set(f"{self.redis_prefix}state.sqlite", data)


def _toml_values(text: str) -> dict[str, Any]:
    import tomllib

    values: dict[str, Any] = tomllib.loads(text)["state"]
    return values


def snapshot_rows(data: bytes, tmp: Path, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` against an uploaded snapshot."""
    path = tmp / f"snap-{os.urandom(4).hex()}.sqlite"
    path.write_bytes(data)
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def s3_remote(s3_server: S3Server, s3_prefix: str) -> Remote:
    return Remote("s3", s3=s3_server, s3_prefix=s3_prefix)


@pytest.fixture
def valkey_remote(redis_server: RedisServer, redis_prefix: str) -> Remote:
    return Remote("valkey", redis=redis_server, redis_prefix=redis_prefix)


@pytest.fixture
def tiered_remote(
    s3_server: S3Server, s3_prefix: str, redis_server: RedisServer, redis_prefix: str
) -> Remote:
    return Remote(
        "tiered", s3=s3_server, s3_prefix=s3_prefix, redis=redis_server, redis_prefix=redis_prefix
    )


# --------------------------------------------------------------------------- machines running rocky

MODEL_SQL = "SELECT id, ts FROM src.events\n"
MODEL_TOML = """\
[strategy]
type = "incremental"
timestamp_column = "ts"

[target]
schema = "marts"
"""
#: the watermark key of the model above (asset key catalog.schema.table; the warehouse file is wh.duckdb)
WATERMARK_KEY = "wh.marts.events_inc"


@dataclass
class Machine:
    """One machine: rocky.toml, models/, a DuckDB warehouse and a local state file of its own."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "rocky.toml"

    @property
    def state_path(self) -> Path:
        return self.root / "models" / ".rocky-state.db"

    def write(self, state_toml: str, hooks: str = "") -> None:
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        (self.root / "models" / "events_inc.sql").write_text(MODEL_SQL)
        (self.root / "models" / "events_inc.toml").write_text(MODEL_TOML)
        toml = TRANSFORMATION_TOML.format(pipeline="models")
        self.config.write_text(toml + "\n" + state_toml + "\n" + hooks)

    def seed(self, *timestamps: str) -> None:
        """Add source rows with these timestamps (the model's watermark becomes their max)."""
        con = duckdb.connect(str(self.root / "wh.duckdb"))
        try:
            con.execute("CREATE SCHEMA IF NOT EXISTS src")
            con.execute("CREATE TABLE IF NOT EXISTS src.events (id INTEGER, ts TIMESTAMP)")
            start = con.execute("SELECT count(*) FROM src.events").fetchone()
            n = int(start[0]) if start else 0
            for i, ts in enumerate(timestamps):
                con.execute("INSERT INTO src.events VALUES (?, ?)", [n + i, ts])
        finally:
            con.close()

    def rocky(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
        return run_rocky(["-c", str(self.config), *args], cwd=self.root, env=aws_env(env), timeout=timeout)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return popen_rocky(["-c", str(self.config), *args], cwd=self.root, env=aws_env(env))

    def watermark(self) -> str | None:
        value = self.local_rows(f"SELECT value FROM watermarks WHERE key = '{WATERMARK_KEY}'", default=None)
        return None if value is None else str(value)

    def local_rows(self, sql: str, default: Any = ()) -> Any:
        conn = sqlite3.connect(self.state_path)
        try:
            rows = conn.execute(sql).fetchall()
        finally:
            conn.close()
        if default is None:
            return rows[0][0] if rows else None
        return rows


BARRIER = """\
import pathlib, sys, time
d, me, other = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(d / me).touch()
deadline = time.monotonic() + 60
while not (d / other).exists():
    if time.monotonic() > deadline:
        sys.exit(f"barrier: {other} never happened")
    time.sleep(0.02)
"""


def barrier_hook(directory: Path, me: str, wait_for: str, *, done: str | None = None) -> str:
    """Hooks that order two machines on events, not on time: ``pipeline_start`` marks ``me`` and waits
    for the marker ``wait_for``; with ``done``, ``pipeline_complete`` (which fires after the run's state
    upload) marks ``done``. A run's remote state is downloaded before its ``pipeline_start``."""
    script = directory / "barrier.py"
    if not script.exists():
        script.write_text(BARRIER)
    command = f"{sys.executable} {script} {directory} {me} {wait_for}"
    hooks = f"[[hook.on_pipeline_start]]\ncommand = '{command}'\ntimeout_ms = 90000\non_failure = \"abort\"\n"
    if done is not None:
        hooks += f"[[hook.on_pipeline_complete]]\ncommand = 'touch {directory / done}'\n"
    return hooks


def aws_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test S3 server's credentials, then ``extra`` (on top of the clean child environment)."""
    return {**AWS_ENV, **(extra or {})}


@pytest.fixture
def machines(tmp_path: Path) -> Callable[[str], Machine]:
    """``machines("a")``: a machine directory under this test's tmp dir."""

    def make(name: str) -> Machine:
        root = tmp_path / name
        root.mkdir()
        return Machine(root)

    return make
