"""Helpers for the server tests: projects on disk, an in-process server on a real 127.0.0.1 socket, and a
real ``rocky serve`` subprocess.

``InProcessServer`` runs the production pieces (``build_context``, ``create_app``, ``DrainingServer``,
``SchedulerLoop``) in a thread of the test process, so status-code tests take milliseconds; ``ServeProcess``
starts the real CLI for what only a process can show (signals, kill -9, two servers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from rocky_engine.project import load_project
from rocky_engine.server.app import create_app
from rocky_engine.server.context import ServerContext, build_context
from rocky_engine.server.drain import Drain, DrainingServer
from rocky_engine.server.scheduler_loop import SchedulerLoop
from rocky_engine.server.serve_process import bind, uvicorn_config
from rocky_engine.server.settings import ServerSettings
from rocky_engine.server.signatures import rocky_signature
from rocky_engine.state import StateStore
from tests.engine.schedule.kit import transformation, write_project

ROCKY = [sys.executable, "-m", "rocky_engine.cli.main"]
SECRET = "s3cret-for-tests"

__all__ = ["ROCKY", "SECRET", "InProcessServer", "ServeProcess", "transformation", "write_project"]

GOOD_MODELS = {"good.sql": "select 1 as x\n"}


def slow_hook(seconds: float) -> str:
    """A pipeline_start hook that keeps a real `rocky run` busy for ``seconds`` (no CPU burnt)."""
    timeout_ms = int(seconds * 1000) + 60000
    return f'\n[[hook.on_pipeline_start]]\ncommand = "sleep {seconds}"\ntimeout_ms = {timeout_ms}\n'


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of servers and their children: no ROCKY_* leaking in, bytecode caching on (the
    machine's PYTHONDONTWRITEBYTECODE makes every child start slower)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ROCKY_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(extra or {})
    return env


def simple_project(root: Path, body: str | None = None, hook: str = "") -> Path:
    """A DuckDB project with one transformation pipeline ``orders`` (plus ``body``); returns rocky.toml."""
    text = transformation("orders") if body is None else body
    return write_project(root, text + hook, GOOD_MODELS)


def sign(body: bytes, secret: str = SECRET) -> dict[str, str]:
    return {"X-Rocky-Signature": rocky_signature(secret, body)}


class InProcessServer:
    """A real HTTP server on 127.0.0.1 in a thread of this process."""

    def __init__(self, config_path: Path, **overrides: Any) -> None:
        settings = ServerSettings(
            config_path=config_path, port=0, child_env=child_env(), kill_grace_seconds=2
        )
        self.settings = replace(settings, **overrides)
        self.project = load_project(config_path, env={})
        self.ctx: ServerContext = build_context(self.settings, self.project)
        self.loop = SchedulerLoop(self.ctx) if self.settings.scheduler else None
        self.drain = Drain(self.ctx, self.loop)
        self._sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn_config(create_app(self.ctx, self.drain), self.settings)
        self.server = DrainingServer(config, self.drain)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self, sweep: bool = True) -> InProcessServer:
        if sweep:
            self.ctx.jobs.sweep()
        if self.loop is not None:
            self.loop.start()
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.ctx.started.is_set():
            assert time.monotonic() < deadline, "in-process server did not start"
            time.sleep(0.01)
        return self

    def first_tick(self, timeout: float = 30) -> None:
        """Wait until the scheduler finished its first tick attempt."""
        wait_for(lambda: self.ctx.last_tick.at is not None, timeout, what="the first tick")

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.drain.begin("test")
        self._thread.join(timeout=60)
        self._sock.close()

    def __enter__(self) -> InProcessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServeProcess:
    """``rocky serve --port 0 ...`` as a real process; :meth:`start` waits for its listening line."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None, name: str = "serve") -> None:
        self.cwd = cwd
        self.args = args
        self.env = child_env(env)
        self.err_path = cwd / f"{name}.stderr.log"
        self.out_path = cwd / f"{name}.stdout.json"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 30) -> ServeProcess:
        with self.err_path.open("wb") as err, self.out_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [*ROCKY, "serve", "--port", "0", *self.args], cwd=self.cwd, env=self.env, stdout=out,
                stderr=err, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log().splitlines():
                if "rocky serve listening on " in line:
                    self.url = line.split("listening on ", 1)[1].split()[0]
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"rocky serve exited {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"rocky serve did not start:\n{self.log()}")

    def log(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def output(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.out_path.read_text())
        return doc

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextmanager
def serving(
    cwd: Path, *args: str, env: dict[str, str] | None = None, name: str = "serve"
) -> Iterator[ServeProcess]:
    server = ServeProcess(cwd, *args, env=env, name=name).start()
    try:
        yield server
    finally:
        server.kill()


def wait_for(predicate: Any, timeout: float = 30, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def wait_job(client: httpx.Client, job_id: str, timeout: float = 60) -> dict[str, Any]:
    """Poll ``GET /api/v1/jobs/{id}`` until the job is finished."""

    def done() -> dict[str, Any] | None:
        r = client.get(f"/api/v1/jobs/{job_id}")
        if r.status_code != 200:
            return None
        doc: dict[str, Any] = r.json()
        return doc if doc["state"] in ("succeeded", "failed") else None

    result: dict[str, Any] = wait_for(done, timeout, what=f"job {job_id}")
    return result


def runs_in_store(config_path: Path) -> list[Any]:
    project = load_project(config_path, env={})
    with StateStore.open(project.state_path(), writer=False) as store:
        return store.runs.list(limit=None)


def spool_files(root: Path) -> list[Path]:
    spool = root / ".rocky" / "pending-demands"
    return sorted(p for p in spool.glob("*.json")) if spool.exists() else []
