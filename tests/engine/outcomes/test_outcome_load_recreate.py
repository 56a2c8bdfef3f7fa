"""``rocky load`` against a store newer than this engine, under ``on_schema_mismatch = "recreate"`` (the
default): it "runs once as a full refresh" (seeds/deployment-contract.md), so the fresh local state that
remembers no earlier load rebuilds the target from the files instead of appending them a second time
(issue 13 item 5); a connector load, whose cursor lives in the store, refuses instead. A real store
file, stamped with a schema version from the future.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocky_engine.project import load_project
from tests.engine.outcomes.kit import sqlite
from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import duckdb_query

CONFIG = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.files]
type = "load"
source_dir = "data"

[pipeline.files.target]
catalog = "wh"
schema = "landing"
"""


def _load(config: Path) -> tuple[int, dict[str, object], str]:
    res = rocky_in_process(["-c", str(config), "load", "--pipeline", "files", "--output", "json"])
    return res.returncode, json.loads(res.stdout), res.stderr


def _rows(root: Path, table: str) -> int:
    return int(duckdb_query(root / "wh.duckdb", f"SELECT count(*) FROM landing.{table}")[0][0])


def test_a_recreated_state_rebuilds_the_target_instead_of_appending_twice(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    config.write_text(CONFIG)
    data = tmp_path / "data"
    data.mkdir()
    (data / "customers.csv").write_text("id,name\n1,ada\n2,bob\n")
    (data / "orders.csv").write_text("id,amount\n1,10\n2,20\n3,30\n")
    code, _, _ = _load(config)
    assert code == 0 and (_rows(tmp_path, "customers"), _rows(tmp_path, "orders")) == (2, 3)

    # a newer engine wrote the store since (its schema version is from the future)
    store = load_project(config).state_path()
    sqlite(store, "UPDATE metadata SET value = '99' WHERE key = 'schema_version'")
    code, doc, stderr = _load(config)
    assert code == 0, stderr
    assert "on_schema_mismatch = recreate: running from a fresh local state" in stderr
    assert "rebuilding customers, orders from the files" in stderr
    assert doc["total_rows"] == 5
    assert (_rows(tmp_path, "customers"), _rows(tmp_path, "orders")) == (2, 3)  # not (4, 6)


def test_a_connector_load_refuses_a_recreated_state_instead_of_appending_twice(tmp_path: Path) -> None:
    """A connector's cursor lives in the store: from a fresh state it would fetch and append its batch a
    second time, so under ``recreate`` it refuses with one line that says why (and appends nothing)."""
    from tests.engine.connectors.kit import ConnectorProject

    cp = ConnectorProject(tmp_path).setup("ok", "rows=4", "files=1")
    assert cp.load_in_process().connector.status == "loaded"
    sqlite(cp.state_path, "UPDATE metadata SET value = '99' WHERE key = 'schema_version'")
    res = rocky_in_process(["-c", str(cp.config), "--output", "json", "load", "--connector", cp.name])
    assert res.returncode == 1 and res.stdout == ""
    [line] = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert "newer than this engine supports" in line
    assert "a connector load never runs from a fresh state" in line
    assert cp.count() == 4  # the batch was not appended a second time
