"""Fixtures of the Dagster integration tests: the real ``rocky`` binary, the playground, a Fivetran project.

Everything runs the real engine as a child process, exactly as Dagster would. The only stand-in is the
Fivetran API (a local fake on 127.0.0.1) and, for the resource's subprocess-handling tests only, tiny
executable scripts in place of the binary.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dagster_rocky import RockyResource
from dagster_rocky.types import DagResult
from tests.fixtures.fake_fivetran import FakeConnector, FakeFivetran, project_toml, serve

REPO = Path(__file__).resolve().parents[2]
PLAYGROUND = REPO / "examples" / "playground"
ROCKY_BIN = Path(sys.executable).parent / "rocky"


@pytest.fixture(scope="session")
def rocky_bin() -> str:
    if not ROCKY_BIN.exists():
        pytest.fail(f"{ROCKY_BIN} is missing: run `pip install -e .` in the venv")
    return str(ROCKY_BIN)


@pytest.fixture
def playground(tmp_path: Path) -> Path:
    """A seeded copy of examples/playground (its own DuckDB file and state store)."""
    dest = tmp_path / "playground"
    shutil.copytree(
        PLAYGROUND,
        dest,
        ignore=shutil.ignore_patterns("*.duckdb", "*.duckdb.wal", ".rocky-state*", ".rocky", "__pycache__"),
    )
    subprocess.run([sys.executable, "seed.py"], cwd=dest, check=True, capture_output=True)
    return dest


@pytest.fixture(scope="session")
def playground_dag(tmp_path_factory: pytest.TempPathFactory) -> DagResult:
    """`rocky dag` of the playground (unseeded: dag reads no warehouse), fct_orders's sidecar filled in."""
    project = tmp_path_factory.mktemp("dag") / "playground"
    shutil.copytree(PLAYGROUND, project, ignore=shutil.ignore_patterns("*.duckdb*", ".rocky*", "__pycache__"))
    (project / "models" / "marts" / "fct_orders.toml").write_text(
        'description = "One row per order."\nowners = ["ana@example.com", "finance"]\n'
        '[tags]\ndomain = "finance"\n'
    )
    return RockyResource(config_path=str(project / "rocky.toml")).dag()


@pytest.fixture
def stand_in(tmp_path: Path) -> Callable[[str], str]:
    """Write an executable shell script standing in for the binary (subprocess-handling tests only)."""
    counter = iter(range(1000))

    def make(body: str) -> str:
        path = tmp_path / f"fake-rocky-{next(counter)}"
        path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip())
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return str(path)

    return make


@pytest.fixture
def fake_fivetran() -> FakeFivetran:
    fake = FakeFivetran()
    fake.add(
        FakeConnector(
            "conn_shop",
            "src__acme__shopify",
            succeeded_at="2026-05-01T10:00:00Z",
            tables={"main": ["orders", "customers"]},
        )
    )
    fake.add(
        FakeConnector(
            "conn_pay",
            "src__acme__stripe",
            service="stripe",
            succeeded_at="2026-05-01T10:30:00Z",
            tables={"main": ["charges"]},
        )
    )
    fake.add(
        FakeConnector(
            "conn_glob",
            "src__globex__shopify",
            succeeded_at="2026-05-01T09:00:00+02:00",
            tables={"main": ["orders"]},
        )
    )
    return fake


@pytest.fixture
def fivetran_project(
    tmp_path: Path, fake_fivetran: FakeFivetran, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A replication project whose discovery is the fake Fivetran API; yields its rocky.toml."""
    monkeypatch.setenv("FAKE_FIVETRAN_KEY", fake_fivetran.api_key)
    monkeypatch.setenv("FAKE_FIVETRAN_SECRET", fake_fivetran.api_secret)
    with serve(fake_fivetran) as base_url:
        project = tmp_path / "fivetran_project"
        project.mkdir()
        config = project / "rocky.toml"
        config.write_text(
            project_toml(
                fake_fivetran,
                base_url,
                catalog="warehouse",
                api_key="${FAKE_FIVETRAN_KEY}",
                api_secret="${FAKE_FIVETRAN_SECRET}",
                pipeline_keys='strategy = "full_refresh"',
            )
        )
        yield config


def env_without_venv_bin() -> dict[str, str]:
    """The environment with the venv's bin dir off PATH (to test the binary lookup fallback)."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_dir)
    return {**os.environ, "PATH": path}
