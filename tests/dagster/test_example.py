"""examples/dagster: `dagster definitions validate`, and the real webserver answering over GraphQL."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.fake_fivetran import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of examples/dagster and a seeded examples/playground side by side; returns workspace.yaml."""
    root = tmp_path / "examples"
    shutil.copytree(
        REPO / "examples" / "dagster",
        root / "dagster",
        ignore=shutil.ignore_patterns(".local_defs_state", "__pycache__"),
    )
    shutil.copytree(
        REPO / "examples" / "playground",
        root / "playground",
        ignore=shutil.ignore_patterns("*.duckdb", "*.duckdb.wal", ".rocky*", "__pycache__"),
    )
    subprocess.run([sys.executable, "seed.py"], cwd=root / "playground", check=True, capture_output=True)
    return root / "dagster" / "workspace.yaml"


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "ROCKY_PLAYGROUND_CONFIG"}
    return {**env, "DAGSTER_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}


@pytest.mark.slow
def test_dagster_definitions_validate(example: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", str(example)],
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Validation successful for code location rocky_example" in output
    # the discover document is now cached as component state for the next load
    assert list((example.parent / "rocky_example" / "defs" / ".local_defs_state").rglob("state"))


QUERY = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on PythonError { message }
          ... on RepositoryLocation {
            repositories {
              name
              assetNodes {
                assetKey { path }
                groupName
                dependencyKeys { path }
                assetChecksOrError { ... on AssetChecks { checks { name } } }
              }
              schedules { name cronSchedule }
              sensors { name minIntervalSeconds }
            }
          }
        }
      }
    }
  }
}
"""


@pytest.fixture
def webserver(example: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "webserver.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", str(example), "-h", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(tmp_path),
        cwd=tmp_path,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    "the webserver exited: " + (tmp_path / "webserver.log").read_text()[-3000:]
                )
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the webserver did not answer within 120 s")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the webserver and the code server it started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def _workspace(url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        response = httpx.post(f"{url}/graphql", json={"query": QUERY}, timeout=60)
        response.raise_for_status()
        entries = response.json()["data"]["workspaceOrError"]["locationEntries"]
        location = entries[0]["locationOrLoadError"] if entries else None
        if location is not None:
            return dict(location)
        if time.monotonic() > deadline:
            raise AssertionError(f"the code location did not load: {response.text[:2000]}")
        time.sleep(1)


@pytest.mark.slow
def test_webserver_serves_rocky_assets_checks_schedule_and_sensor(webserver: str) -> None:
    location = _workspace(webserver)
    assert location["__typename"] == "RepositoryLocation", location
    (repo,) = location["repositories"]
    nodes = {tuple(n["assetKey"]["path"]): n for n in repo["assetNodes"]}

    def deps(*key: str) -> set[tuple[str, ...]]:
        return {tuple(d["path"]) for d in nodes[key]["dependencyKeys"]}

    def checks(*key: str) -> set[str]:
        return {c["name"] for c in nodes[key]["assetChecksOrError"]["checks"]}

    for key in (
        ("duckdb", "orders", "orders"),
        ("duckdb", "orders", "customers"),
        ("duckdb", "payments", "payments"),
    ):
        assert key in nodes, sorted(nodes)
        assert checks(*key) == set()  # the playground configures no replication checks: none declared
    assert nodes[("duckdb", "orders", "orders")]["groupName"] == "orders"
    # the nine models come from `rocky dag`, with their real deps on the replication assets and each other
    models = {k for k in nodes if k[0] == "playground"}
    assert len(models) == 9
    assert deps("playground", "staging", "stg_orders") == {("duckdb", "orders", "orders")}
    assert deps("playground", "marts", "dim_customers") == {
        ("playground", "staging", "stg_customers"),
        ("playground", "intermediate", "int_customer_orders"),
    }
    assert checks("playground", "marts", "fct_orders") == {"not_null_order_id", "unique_order_id"}
    schedules = {s["name"]: s for s in repo["schedules"]}
    assert schedules["daily_replication"]["cronSchedule"] == "0 6 * * *"
    sensors = {s["name"]: s for s in repo["sensors"]}
    assert sensors["playground_source_sensor"]["minIntervalSeconds"] == 300


@pytest.fixture
def example_defs(example: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The example's Definitions loaded in this process (its package removed from sys.modules after)."""
    import dagster as dg

    project = example.parent
    monkeypatch.syspath_prepend(str(project))
    try:
        yield dg.load_from_defs_folder(path_within_project=project)
    finally:
        for name in [m for m in sys.modules if m == "rocky_example" or m.startswith("rocky_example.")]:
            del sys.modules[name]


@pytest.mark.slow
def test_materialize_all_with_the_default_multiprocess_executor_then_a_subset(
    example: Path, tmp_path: Path, example_defs: Any
) -> None:
    """`dagster asset materialize --select '*'`: the orders and payments steps start at the same time, in
    their own processes, each running `rocky run` on one state store; they take turns on its lock
    (`--wait-for-lock`) instead of the second one failing. Then a two-model subset is one rocky process."""
    import dagster as dg

    from dagster_rocky import RockyResource

    definitions = example.parent / "rocky_example" / "definitions.py"
    proc = subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "--select", "*", "-f", str(definitions)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert "multiprocess" in output, output[-3000:]  # the default executor: one process per step
    assert output.count("ASSET_MATERIALIZATION - Materialized value") == 3 + 9, output[-6000:]
    assert "RUN_SUCCESS" in output

    job = example_defs.resolve_implicit_global_asset_job_def()
    models = [
        dg.AssetKey(["playground", "staging", "stg_orders"]),
        dg.AssetKey(["playground", "staging", "stg_payments"]),
    ]
    rocky = RockyResource(config_path=str(example.parent.parent / "playground" / "rocky.toml"))
    before = {r.run_id for r in rocky.history().runs}
    subset = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), asset_selection=models)
    assert subset.success
    assert sorted(e.asset_key for e in subset.get_asset_materialization_events()) == sorted(models)
    new = [r for r in rocky.history().runs if r.run_id not in before]
    assert len(new) == 1  # one `rocky run --model stg_orders --model stg_payments`
    assert new[0].pipeline == "models"
