"""Load pipelines: CSV / Parquet / JSONL files into DuckDB, per-file containment and exit codes, the load
document from `rocky load` and `rocky run`, and the refusals (missing source_dir, PostgreSQL target)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest

from rocky_engine.errors import ConfigError, UsageError
from rocky_engine.project import load_project
from rocky_engine.run.load import detect_format, execute_load
from rocky_engine.run.load_output import LoadOutput
from rocky_engine.state.store import StateStore

if TYPE_CHECKING:
    from conftest import WarehouseProject

CONFIG = """
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.files]
type = "load"
source_dir = "data"
{extra}
[pipeline.files.target]
catalog = "wh"
schema = "landing"
{table}
"""


def configure(wp: WarehouseProject, *, table: str | None = None, extra: str = "") -> Path:
    wp.write_config(CONFIG.format(extra=extra, table=f'table = "{table}"' if table else ""))
    data: Path = wp.root / "data"
    data.mkdir(exist_ok=True)
    return data


def write_parquet(path: Path, select: str) -> None:
    con = duckdb.connect()
    try:
        con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    finally:
        con.close()


def three_formats(data: Path) -> None:
    (data / "customers.csv").write_text("id,name\n1,ada\n2,bob\n")
    write_parquet(data / "orders.parquet", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    (data / "events.jsonl").write_text('{"id": 1, "kind": "click"}\n{"id": 2, "kind": "view"}\n'
                                       '{"id": 3, "kind": "view"}\n')


def load(wp: WarehouseProject, name: str = "files") -> LoadOutput:
    return execute_load(load_project(wp.config), name)


def test_each_format_loads_into_a_table_named_after_the_file(wp: WarehouseProject) -> None:
    data = configure(wp)
    three_formats(data)
    res = wp.cli("load", "--pipeline", "files", "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = res.json
    sizes = {p.name: p.stat().st_size for p in data.iterdir()}
    assert doc["command"] == "load" and doc["pipeline"] == "files" and doc["status"] == "Success"
    ours = ("path", "table", "rows", "bytes")
    assert [{k: f[k] for k in ours} for f in doc["files"]] == [
        {"path": "data/customers.csv", "table": "customers", "rows": 2, "bytes": sizes["customers.csv"]},
        {"path": "data/events.jsonl", "table": "events", "rows": 3, "bytes": sizes["events.jsonl"]},
        {"path": "data/orders.parquet", "table": "orders", "rows": 5, "bytes": sizes["orders.parquet"]},
    ]
    # the published names of the same facts, and the target's full name
    for f in doc["files"]:
        assert (f["file"], f["rows_loaded"], f["bytes_read"]) == (f["path"], f["rows"], f["bytes"])
        assert f["target"] == f"wh.landing.{f['table']}" and isinstance(f["duration_ms"], int)
    assert doc["source_dir"].endswith("data") and doc["format"] == "mixed"
    assert (doc["files_loaded"], doc["files_failed"], doc["total_rows"]) == (3, 0, 10)
    assert doc["total_bytes"] == sum(sizes.values())
    assert isinstance(doc["duration_ms"], int) and "version" in doc
    assert wp.query("SELECT name FROM landing.customers ORDER BY id") == [("ada",), ("bob",)]
    assert wp.query("SELECT SUM(amount) FROM landing.orders") == [(100,)]
    assert wp.query("SELECT kind FROM landing.events WHERE id = 1") == [("click",)]


def test_one_table_for_every_file_widens_and_reingests(wp: WarehouseProject) -> None:
    data = configure(wp, table="raw_events")
    (data / "a.jsonl").write_text('{"id": 1, "kind": "click"}\n')
    (data / "b.ndjson").write_text('{"id": 2, "kind": "view", "user": "u1"}\n')
    write_parquet(data / "c.pq", "SELECT 3 AS id")
    out = load(wp)
    assert out.status == "Success" and [f.table for f in out.files] == ["raw_events"] * 3
    assert wp.query("SELECT id, kind, user FROM landing.raw_events ORDER BY id") == [
        (1, "click", None), (2, "view", "u1"), (3, None, None),
    ]
    # A load is not incremental: every run re-reads every file (hence: no scheduling).
    assert load(wp).total_rows == 3
    assert wp.query("SELECT COUNT(*) FROM landing.raw_events") == [(6,)]


def test_format_key_reads_any_extension_and_unknown_files_are_skipped(wp: WarehouseProject) -> None:
    data = configure(wp)
    (data / "export.txt").write_text("a,b\n1,2\n")
    (data / "notes.md").write_text("# not data\n")
    (data / ".hidden.csv").write_text("x\n1\n")
    (data / "_SUCCESS").write_text("")
    (data / "nested").mkdir()
    out = load(wp)
    assert out.files == [] and out.status == "Success" and out.exit_code() == 0
    configure(wp, extra='format = "csv"')
    out = load(wp)
    assert [(f.path, f.table, f.rows) for f in out.files] == [
        ("data/export.txt", "export", 1), ("data/notes.md", "notes", 0),  # a lone line is a header
    ]


def test_a_bad_file_fails_alone_and_exits_2(wp: WarehouseProject) -> None:
    data = configure(wp)
    three_formats(data)
    (data / "broken.parquet").write_text("not parquet at all")
    (data / "bad.jsonl").write_text('{"id": 1}\n{not json\n')
    res = wp.cli("load", "--output", "json")
    assert res.returncode == 2, res.stderr
    doc = res.json
    assert doc["status"] == "PartialFailure"
    assert (doc["files_loaded"], doc["files_failed"], doc["total_rows"]) == (3, 2, 10)
    failed = {f["path"]: f for f in doc["files"] if "error" in f}
    assert set(failed) == {"data/bad.jsonl", "data/broken.parquet"}
    broken = failed["data/broken.parquet"]
    assert (broken["rows"], broken["bytes"], broken["table"]) == (0, 0, "broken")
    assert "broken.parquet" in broken["error"] and broken["error"].startswith("Invalid Input Error")
    # A failed file leaves no table and no partial rows behind.
    leftovers = "SELECT COUNT(*) FROM information_schema.tables WHERE table_name IN ('bad', 'broken')"
    assert wp.query(leftovers) == [(0,)]
    assert "loading data/broken.parquet into broken failed" in res.stderr


def test_nothing_loaded_exits_1(wp: WarehouseProject) -> None:
    data = configure(wp)
    (data / "broken.parquet").write_text("nope")
    res = wp.cli("load", "--output", "json")
    assert res.returncode == 1
    assert res.json["status"] == "Failure" and res.json["files_failed"] == 1


def test_missing_source_dir_is_a_clear_error(wp: WarehouseProject) -> None:
    configure(wp)
    (wp.root / "data").rmdir()
    res = wp.cli("load", "--pipeline", "files")
    assert res.returncode == 1 and res.stdout == ""
    assert f"load pipeline 'files': source_dir {wp.root / 'data'} does not exist" in res.stderr
    assert "Traceback" not in res.stderr
    (wp.root / "data").write_text("a file")
    with pytest.raises(ConfigError, match="is not a directory"):
        load(wp)


def test_loaded_files_are_recorded_and_no_run_record_is_written(wp: WarehouseProject) -> None:
    data = configure(wp)
    three_formats(data)
    (data / "broken.parquet").write_text("nope")
    out = load(wp)
    assert out.exit_code() == 2
    with StateStore.open(wp.state_path, writer=False) as store:
        rows = store.query("SELECT scope, file_key, rows, size_bytes FROM loaded_files ORDER BY file_key")
        assert [tuple(r) for r in rows] == [
            ("files", "data/customers.csv", 2, (data / "customers.csv").stat().st_size),
            ("files", "data/events.jsonl", 3, (data / "events.jsonl").stat().st_size),
            ("files", "data/orders.parquet", 5, (data / "orders.parquet").stat().st_size),
        ]
        assert store.runs.list() == []


def test_rocky_run_on_a_load_pipeline_prints_the_load_document(wp: WarehouseProject) -> None:
    data = configure(wp)
    three_formats(data)
    res = wp.cli("run", "--pipeline", "files", "--output", "json")
    assert res.returncode == 0, res.stderr
    assert res.json["command"] == "load" and res.json["files_loaded"] == 3
    assert wp.runs() == []
    res = wp.cli("run", "--pipeline", "files", "--idempotency-key", "k1")
    assert res.returncode == 1
    assert "--idempotency-key cannot be used with load pipeline 'files'" in res.stderr


def test_table_and_markdown_rendering(wp: WarehouseProject) -> None:
    data = configure(wp)
    (data / "customers.csv").write_text("id\n1\n")
    res = wp.cli("load", "--output", "table")
    assert res.returncode == 0
    assert "load files  status=Success  files=1 loaded, 0 failed  rows=1" in res.stdout
    assert "data/customers.csv" in res.stdout
    res = wp.cli("load", "--output", "md")
    assert res.stdout.startswith("**rocky load** `files`: Success, 1 file(s) loaded")


def test_choosing_the_pipeline(wp: WarehouseProject) -> None:
    wp.write_config(CONFIG.format(extra="", table="") + """
[pipeline.more]
type = "load"
source_dir = "more"
target = { catalog = "wh", schema = "landing" }

[pipeline.dq]
type = "quality"
tables = [{ catalog = "wh", schema = "landing" }]
checks = { row_count = true }
""")
    res = wp.cli("load")
    assert res.returncode == 1 and "several load pipelines (files, more)" in res.stderr
    res = wp.cli("load", "--pipeline", "dq")
    assert res.returncode == 1 and "pipeline 'dq' is a quality pipeline, not a load pipeline" in res.stderr
    res = wp.cli("load", "--pipeline", "nope")
    assert res.returncode == 1 and "unknown pipeline 'nope'" in res.stderr
    with pytest.raises(UsageError):
        load(wp, "dq")


def test_wrong_catalog_is_a_config_error(wp: WarehouseProject) -> None:
    configure(wp)
    wp.config.write_text(wp.config.read_text().replace('catalog = "wh"', 'catalog = "warehouse"'))
    res = wp.cli("load")
    assert res.returncode == 1
    assert "targets catalog 'warehouse', but adapter 'default' is catalog 'wh'" in res.stderr
    assert 'set catalog = "wh"' in res.stderr


def test_postgres_target_is_refused(wp: WarehouseProject) -> None:
    wp.write_config("""
        [adapter]
        type = "postgres"
        dsn = "postgresql://nobody@127.0.0.1:1/nowhere"
        [pipeline.files]
        type = "load"
        source_dir = "data"
        target = { catalog = "nowhere", schema = "landing" }
    """)
    (wp.root / "data").mkdir()
    with pytest.raises(ConfigError, match="support DuckDB targets only"):
        load(wp)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a.csv", ("csv", "a")), ("a.CSV", ("csv", "a")), ("a.csv.gz", ("csv", "a")), ("a.tsv", ("csv", "a")),
     ("b.parquet", ("parquet", "b")), ("b.pq", ("parquet", "b")), ("c.jsonl", ("jsonl", "c")),
     ("c.ndjson", ("jsonl", "c")), ("d.json", None), (".csv", None), ("e", None)],
)
def test_detect_format(name: str, expected: tuple[str, str] | None) -> None:
    assert detect_format(name) == expected
