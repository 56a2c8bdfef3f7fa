"""Schema drift handled by real runs: ADD COLUMN, safe widening via ALTER, otherwise drop and rebuild."""

from __future__ import annotations

from tests.engine.replication.conftest import ReplicationProject


def _types(rp: ReplicationProject, schema: str, table: str) -> dict[str, str]:
    return dict(rp.query(
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{schema}' AND table_name = '{table}'"
    ))


def test_new_column_is_added(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=5)
    rp.run()
    rp.sql("ALTER TABLE src__orders.orders ADD COLUMN note VARCHAR",
           "INSERT INTO src__orders.orders VALUES (5, 'v5', TIMESTAMP '2026-02-01', 'hello')")
    out = rp.run()
    assert out.drift.tables_checked == 1 and out.drift.tables_drifted == 1
    assert [(a.table, a.action, a.reason) for a in out.drift.actions_taken] == [
        ("wh.stg__orders.orders", "add_column", "column 'note' (VARCHAR) is new in the source")
    ]
    assert out.materializations[0].rows_copied == 1
    assert rp.query("SELECT id, note FROM stg__orders.orders WHERE note IS NOT NULL") == [(5, "hello")]


def test_safe_widening_alters_the_column(rp: ReplicationProject) -> None:
    rp.sql("CREATE SCHEMA src__m", "CREATE TABLE src__m.m (id INTEGER, amount DECIMAL(10,2), ts TIMESTAMP)",
           "INSERT INTO src__m.m VALUES (1, 1.50, TIMESTAMP '2026-01-01')")
    rp.run()
    rp.sql("ALTER TABLE src__m.m ALTER COLUMN id TYPE BIGINT",
           "ALTER TABLE src__m.m ALTER COLUMN amount TYPE DECIMAL(14,2)",
           "INSERT INTO src__m.m VALUES (5000000000, 123456789.25, TIMESTAMP '2026-01-02')")
    out = rp.run()
    assert out.status == "Success"
    assert [a.action for a in out.drift.actions_taken] == ["alter_column_type", "alter_column_type"]
    assert out.drift.actions_taken[0].reason == "column 'id' widened INTEGER -> BIGINT"
    types = _types(rp, "stg__m", "m")
    assert types["id"] == "BIGINT" and types["amount"] == "DECIMAL(14,2)"
    assert rp.count("stg__m.m") == 2  # altered in place, not rebuilt


def test_other_type_change_drops_and_rebuilds(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=5)
    rp.run()
    rp.sql("ALTER TABLE src__orders.orders ALTER COLUMN v TYPE INTEGER USING length(v)")
    out = rp.run()
    assert out.status == "Success"
    assert [a.action for a in out.drift.actions_taken] == ["drop_and_recreate"]
    assert out.drift.actions_taken[0].reason == (
        "column 'v' changed VARCHAR -> INTEGER, which is not a safe widening"
    )
    assert out.materializations[0].rows_copied == 5
    assert _types(rp, "stg__orders", "orders")["v"] == "INTEGER"
    assert rp.query("SELECT DISTINCT v FROM stg__orders.orders") == [(2,)]


def test_drift_is_reported_in_the_run_record(rp: ReplicationProject) -> None:
    rp.source_table("src__orders", "orders", rows=2)
    rp.run()
    rp.sql("ALTER TABLE src__orders.orders ADD COLUMN extra INTEGER")
    out = rp.run()
    with rp.store() as store:
        record = store.runs.get(out.run_id or "")
    assert record is not None
    assert record.extra["drift"]["tables_drifted"] == 1


def test_target_equals_source_after_every_drifting_run(rp: ReplicationProject) -> None:
    """A source that drifts on every run (and grows) stays exactly equal in the target after each run."""
    rows = 5_000
    rp.sql(
        "CREATE SCHEMA src__big",
        "CREATE TABLE src__big.events AS SELECT range::INTEGER AS id, (range % 97)::SMALLINT AS small, "
        "'name ' || range AS name, (range / 7.0)::FLOAT AS ratio, (range % 100)::DECIMAL(8,2) AS price, "
        f"TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range({rows})",
    )
    drifts = [
        ["ALTER TABLE src__big.events ADD COLUMN tag VARCHAR"],
        ["ALTER TABLE src__big.events ALTER COLUMN id TYPE BIGINT",
         "ALTER TABLE src__big.events ALTER COLUMN small TYPE INTEGER"],
        ["ALTER TABLE src__big.events ALTER COLUMN ratio TYPE DOUBLE",
         "ALTER TABLE src__big.events ALTER COLUMN price TYPE DECIMAL(12,2)"],
        ["ALTER TABLE src__big.events ALTER COLUMN name TYPE INTEGER USING length(name)"],
        ["ALTER TABLE src__big.events ALTER COLUMN tag TYPE INTEGER USING length(tag)",
         "ALTER TABLE src__big.events ADD COLUMN flag BOOLEAN"],
    ]
    expected_actions = [
        ["add_column"],
        ["alter_column_type", "alter_column_type"],
        ["alter_column_type", "alter_column_type"],
        ["drop_and_recreate"],
        ["drop_and_recreate"],
    ]
    out = rp.run()
    _assert_equal(rp)
    next_id = rows
    for statements, actions in zip(drifts, expected_actions, strict=True):
        rp.sql(*statements)
        cols = [r[0] for r in rp.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'src__big' "
            "ORDER BY ordinal_position")]
        values = {
            "id": "range", "small": "(range % 97)", "name": "length('n' || range)", "ratio": "range / 7.0",
            "price": "(range % 100)", "ts": "TIMESTAMP '2026-01-01' + to_seconds(range)",
            "tag": "(range % 3)", "flag": "range % 2 = 0",
        }
        if "tag" in cols and "USING" not in " ".join(statements) and actions == ["add_column"]:
            values["tag"] = "'t' || range"
        if dict(rp.query("SELECT column_name, data_type FROM information_schema.columns "
                         "WHERE table_schema = 'src__big'")).get("name") == "VARCHAR":
            values["name"] = "'name ' || range"
        select = ", ".join(values[c] for c in cols)
        rp.sql(f"INSERT INTO src__big.events ({', '.join(cols)}) SELECT {select} "
               f"FROM range({next_id}, {next_id + 500})")
        next_id += 500
        out = rp.run()
        assert out.status == "Success", out.errors
        assert [a.action for a in out.drift.actions_taken] == actions
        _assert_equal(rp)


def _assert_equal(rp: ReplicationProject) -> None:
    source_types = _types(rp, "src__big", "events")
    target_types = _types(rp, "stg__big", "events")
    assert source_types == target_types
    cols = ", ".join(f'"{c}"' for c in source_types)
    assert rp.query(f"SELECT count(*) FROM (SELECT {cols} FROM src__big.events EXCEPT ALL "
                    f"SELECT {cols} FROM stg__big.events)") == [(0,)]
    assert rp.query(f"SELECT count(*) FROM (SELECT {cols} FROM stg__big.events EXCEPT ALL "
                    f"SELECT {cols} FROM src__big.events)") == [(0,)]
