"""The published ``dagster-rocky`` 1.74.0 ``RockyResource`` (with its ``rocky-sdk`` 0.29.0) drives our engine
on the playground: discover, run, resume_run, run_model, history (both shapes), state, state_health, doctor
and ci each succeed and return what the playground implies.

The client runs in its own venv (``scripts/setup-published-client.sh``: created by ``make test-deps``, or by
this test when missing; cached by a stamp), with a ``rocky --version`` shim as the only adaptation, in a
real subprocess: the client's own process, its own ``rocky`` subprocesses, our engine behind them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.fixtures.inprocess import rocky_in_process

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
CLIENT_VENV = REPO / ".venv-published"
DRIVER = Path(__file__).with_name("published_client_driver.py")


def _client_venv() -> Path:
    """The published client's venv (created here when ``make test-deps`` has not)."""
    ours = Path(sys.prefix)
    setup = subprocess.run(["bash", str(REPO / "scripts" / "setup-published-client.sh"), str(ours),
                            str(CLIENT_VENV)], capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    return CLIENT_VENV


def _ci_takes_models() -> bool:
    """``ci()`` sends ``--models DIR``: called once our CLI has the flag (the config forms' part)."""
    return "--models" in rocky_in_process(["ci", "--help"]).stdout


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    venv = _client_venv()
    root = tmp_path_factory.mktemp("playground")
    shutil.copytree(REPO / "examples" / "playground", root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.duckdb", "*.wal", ".rocky*"))
    # the playground's own seed, in this process (a python start-up less)
    spec = importlib.util.spec_from_file_location("playground_seed", root / "seed.py")
    assert spec is not None and spec.loader is not None
    seed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seed)
    con = duckdb.connect(str(root / "playground.duckdb"))
    try:
        con.execute(seed.SEED_SQL)
    finally:
        con.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKY_")}
    # the shim is the `rocky` the client finds on PATH; our own venv's bin is not on it
    env["PATH"] = f"{venv / 'shim'}{os.pathsep}{env.get('PATH', '')}"
    args = ["ci"] if _ci_takes_models() else []
    proc = subprocess.run([str(venv / "bin" / "python"), str(DRIVER), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    doc["_root"] = str(root)
    return doc


def _count(root: str, sql: str) -> int:
    con = duckdb.connect(str(Path(root) / "playground.duckdb"), read_only=True)
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


def test_the_published_client_is_the_one_driven(seen: dict[str, Any]) -> None:
    path, client, sdk = seen["client"]
    assert path.startswith(str(CLIENT_VENV)) and (client, sdk) == ("1.74.0", "0.29.0")


def test_discover(seen: dict[str, Any]) -> None:
    assert seen["discover"] == [["raw__orders", ["customers", "orders"]], ["raw__payments", ["payments"]]]


def test_run_and_resume_run(seen: dict[str, Any]) -> None:
    run = seen["run"]
    assert run["status"] == "Success" and run["tables_copied"] == 2
    orders = ["playground.staging__orders.customers", "playground.staging__orders.orders"]
    assert run["materialized"] == orders
    assert run["rows"] == 1000 + 20000
    # resume_run() sends no --pipeline: the replication pipeline's latest run is the one looked at; it
    # succeeded, so nothing is resumed and the run is an ordinary incremental one over every table
    resumed = seen["resume_run"]
    assert resumed["status"] == "Success" and resumed["resumed_from"] is None
    assert (resumed["tables_copied"], resumed["tables_skipped"]) == (3, 0)
    paid = _count(seen["_root"], "SELECT count(*) FROM raw__payments.payments")
    assert resumed["materialized"] == [*orders, "playground.staging__payments.payments"]
    assert resumed["rows"] == paid  # the orders tables had no new rows


def test_run_model(seen: dict[str, Any]) -> None:
    one = seen["run_model"]
    assert one["status"] == "Success" and one["materialized"] == ["playground.staging.stg_customers"]
    assert one["rows"] == 1000


def test_history_both_shapes(seen: dict[str, Any]) -> None:
    history = seen["history"]
    assert history["count"] == 3 == len(history["runs"]), history
    assert [r["status"] for r in history["runs"]] == ["Success"] * 3
    # (tables copied concurrently finish in any order)
    assert [sorted(r["models"]) for r in history["runs"]] == [
        ["stg_customers"],
        ["playground.staging__orders.customers", "playground.staging__orders.orders",
         "playground.staging__payments.payments"],
        ["playground.staging__orders.customers", "playground.staging__orders.orders"],
    ]
    model = seen["history_model"]
    assert model["count"] == 1
    [execution] = model["executions"]
    assert execution["status"] == "success" and execution["rows"] == 1000 and len(execution["sql_hash"]) == 16


def test_state_watermarks(seen: dict[str, Any]) -> None:
    # the newest _fivetran_synced of each source table, in UTC
    assert seen["state"] == {
        "playground.staging__orders.customers": "2026-11-01T00:00:00+00:00",
        "playground.staging__orders.orders": "2026-11-01T00:59:59+00:00",
        "playground.staging__payments.payments": "2026-11-01T00:59:59+00:00",
    }


def test_state_health_reads_the_last_run(seen: dict[str, Any]) -> None:
    health = seen["state_health"]
    assert health["last_run_status"] == "success" and health["backend"] == "local"
    assert health["last_run_at"] is not None


def test_doctor(seen: dict[str, Any]) -> None:
    doctor = seen["doctor"]
    assert doctor["overall"] in {"healthy", "warning"}
    assert {"config", "state", "adapters", "pipelines"} <= set(doctor["checks"])


def test_ci(seen: dict[str, Any]) -> None:
    if "ci" not in seen:
        pytest.skip("our `rocky ci` has no --models yet (the published ci() sends it)")
    ci = seen["ci"]
    assert ci["exit_code"] in (0, 4) and ci["compile_ok"] is True and ci["failures"] == 0
    assert ci["models_compiled"] == 9  # the playground's models
