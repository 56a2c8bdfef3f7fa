"""Test kit shared by the hooks, ops and deploy tests: a small DuckDB project, a real ``rocky``
subprocess, and a local HTTP receiver for webhooks (127.0.0.1 only)."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fixtures.projects import TRANSFORMATION_TOML, Cli, duckdb_sql, run_rocky

GOOD_SQL = "SELECT id, amount FROM raw.orders"
BAD_SQL = "SELECT no_such_column FROM raw.orders"


def make_project(
    root: Path,
    models: dict[str, str] | None = None,
    *,
    extra_toml: str = "",
    seed: bool = True,
) -> Path:
    """A transformation pipeline ``models`` on ``wh.duckdb`` with a seeded ``raw.orders``; returns
    the path of rocky.toml."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "rocky.toml"
    config.write_text(TRANSFORMATION_TOML.format(pipeline="models") + textwrap.dedent(extra_toml))
    model_dir = root / "models"
    model_dir.mkdir(exist_ok=True)
    for name, sql in (models if models is not None else {"good": GOOD_SQL}).items():
        (model_dir / f"{name}.sql").write_text(sql + "\n")
    if seed:
        duckdb_sql(
            root / "wh.duckdb",
            "CREATE SCHEMA IF NOT EXISTS raw",
            "CREATE OR REPLACE TABLE raw.orders AS "
            "SELECT * FROM (VALUES (1, 10.0), (2, 20.0)) AS t(id, amount)",
        )
    return config


def rocky(config: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Cli:
    """A real ``rocky -c <config> <args>`` subprocess (cwd: the project directory)."""
    return run_rocky(["-c", str(config), *args], cwd=config.parent, env=env, timeout=timeout)


def run_in_process(config: Path, **options: Any) -> Any:
    """``rocky run`` in this process (faster than a subprocess)."""
    from rocky_engine.project import load_project
    from rocky_engine.run.options import RunOptions
    from rocky_engine.run.runner import execute_run

    return execute_run(load_project(config), RunOptions(**options))


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A local webhook receiver: answers ``statuses`` in turn (the last one repeats) after ``delay_s``."""

    port: int
    statuses: list[int] = field(default_factory=lambda: [200])
    delay_s: float = 0.0
    requests: list[Received] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook/T0KEN-SECRET-PATH"


@contextmanager
def receiver(statuses: list[int] | None = None, delay_s: float = 0.0) -> Iterator[Receiver]:
    state = Receiver(port=0, statuses=list(statuses or [200]), delay_s=delay_s)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with lock:
                state.requests.append(Received(self.command, self.path, dict(self.headers.items()), body))
                index = min(len(state.requests) - 1, len(state.statuses) - 1)
                status = state.statuses[index]
            if state.delay_s:
                time.sleep(state.delay_s)
            try:
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the client gave up (timeout test)

        do_POST = _handle
        do_PUT = _handle
        do_GET = _handle

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
