"""One store locator (issue 12): every command, the server and the scheduler use the same state file,
whatever the pipelines of rocky.toml, their order or their globs. Real ``rocky`` subprocesses and a real
``rocky serve`` on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.server.kit import serving, wait_job
from tests.fixtures.projects import Cli, run_rocky

pytestmark = pytest.mark.slow

INCREMENTAL = '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\n'


def pipeline(name: str, models: str) -> str:
    return f'\n[pipeline.{name}]\ntype = "transformation"\nmodels = "{models}"\n'


def write_project(root: Path, *blocks: tuple[str, str]) -> Path:
    """rocky.toml with one transformation pipeline per ``(name, models dir)`` and an incremental model in
    each dir (so a run also writes a watermark, which ``rocky state`` lists)."""
    body = '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n'
    for name, directory in blocks:
        body += pipeline(name, f"{directory}/**")
        (root / directory).mkdir(parents=True, exist_ok=True)
        (root / directory / f"{name}_t.sql").write_text("select 1 as x, timestamp '2026-01-01' as ts\n")
        (root / directory / f"{name}_t.toml").write_text(INCREMENTAL)
    config = root / "rocky.toml"
    config.write_text(body)
    return config


def rocky(root: Path, *args: str) -> Cli:
    proc = run_rocky(["--output", "json", *args], cwd=root)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc


def seen_by_every_reader(root: Path, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """What history, state, doctor and a real `rocky serve` (GET /api/v1/runs) each read."""
    history = [r["run_id"] for r in rocky(root, *flags, "history").json["runs"]]
    state = [w["key"] for w in rocky(root, *flags, "state").json["watermarks"]]
    doctor = next(c for c in rocky(root, *flags, "doctor").json["checks"] if c["name"] == "state")
    with serving(root, *flags) as server, server.client() as client:
        api = [r["run_id"] for r in client.get("/api/v1/runs").json()["runs"]]
    return {"history": history, "state": state, "doctor": doctor["message"], "api": api}


def test_a_staging_glob_project_has_one_store_for_every_reader(tmp_path: Path) -> None:
    write_project(tmp_path, ("orders", "models/staging"))
    run = rocky(tmp_path, "run").json
    store = tmp_path / "models" / ".rocky-state.db"
    assert store.exists() and not (tmp_path / "models" / "staging" / ".rocky-state.db").exists()
    assert seen_by_every_reader(tmp_path) == {
        "history": [run["run_id"]], "state": ["wh.main.orders_t"], "api": [run["run_id"]],
        "doctor": f"{store} readable, 1 run(s) recorded",
    }


@pytest.mark.parametrize("models_dir", [True, False], ids=["models-dir", "no-models-dir"])
def test_a_namespace_has_one_store_with_and_without_a_models_dir(tmp_path: Path, models_dir: bool) -> None:
    write_project(tmp_path, ("orders", "models/staging" if models_dir else "sql"))
    flags = ("--state-namespace", "foo")
    run = rocky(tmp_path, *flags, "run").json
    base = tmp_path / "models" if models_dir else tmp_path
    store = base / ".rocky-state" / "foo.db"
    assert store.exists()
    assert seen_by_every_reader(tmp_path, flags) == {
        "history": [run["run_id"]], "state": ["wh.main.orders_t"], "api": [run["run_id"]],
        "doctor": f"{store} readable, 1 run(s) recorded",
    }
    assert rocky(tmp_path, "history").json["runs"] == []  # the default store is another one


def test_reordering_the_pipelines_changes_nothing(tmp_path: Path) -> None:
    """Old rule: the store followed the first transformation pipeline, so swapping two blocks gave an
    empty store and an idempotency key that had already succeeded ran again."""
    config = write_project(tmp_path, ("a", "models/staging"), ("b", "models/marts"))
    first = rocky(tmp_path, "run", "--pipeline", "a", "--idempotency-key", "nightly-1").json
    assert first["status"] == "Success"
    write_project(tmp_path, ("b", "models/marts"), ("a", "models/staging"))
    assert config.read_text().index("[pipeline.b]") < config.read_text().index("[pipeline.a]")
    again = rocky(tmp_path, "run", "--pipeline", "a", "--idempotency-key", "nightly-1").json
    assert (again["status"], again["skipped_by_run_id"]) == ("SkippedIdempotent", first["run_id"])
    assert [r["run_id"] for r in rocky(tmp_path, "history").json["runs"]] == [first["run_id"]]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.db")) == [
        "models/.rocky-state.db"
    ]


def test_serve_keeps_the_store_it_started_with(tmp_path: Path) -> None:
    """A models/ directory created under a running server would change the rule's answer; the server
    (which reloads an edited rocky.toml), its jobs and their children stay on the file settled at start."""
    config = write_project(tmp_path, ("orders", "sql"))
    store = tmp_path / ".rocky-state.db"
    with serving(tmp_path) as server, server.client() as client:
        (tmp_path / "models").mkdir()
        config.write_text(config.read_text() + "# edited under the server\n")
        job = client.post("/api/v1/jobs/run", json={"pipeline": "orders"}).json()
        done = wait_job(client, job["job_id"])
        assert done["state"] == "succeeded", done
        runs = client.get("/api/v1/runs").json()["runs"]
    assert len(runs) == 1
    assert store.exists() and not (tmp_path / "models" / ".rocky-state.db").exists()
