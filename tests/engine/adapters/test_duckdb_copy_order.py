"""A copy into DuckDB writes its stream without keeping the stream's order, and only the copy does.

``scan_arrow`` lets DuckDB write the arriving rows with all its threads (``preserve_insertion_order`` off
for the session, bench/replication_peers.md phase 4). The setting must not outlive the copy: a model
built later on the same session with ``ORDER BY`` keeps its order, and other sessions never see it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from rocky_engine.adapters.duckdb.adapter import DuckDbAdapter, DuckDbSession
from rocky_engine.errors import AdapterError

ORDER = "SELECT current_setting('preserve_insertion_order')"


def stream(n: int) -> pa.RecordBatchReader:
    table = pa.table({"id": pa.array(range(n), pa.int64())})
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1000))


def keeps_order(session: DuckDbSession) -> bool:
    return bool(session.query(ORDER)[0][0])


@pytest.mark.parametrize("once", [True, False], ids=["scanned once", "staged (merge)"])
def test_the_copy_writes_unordered_and_the_session_keeps_order_afterwards(once: bool) -> None:
    adapter = DuckDbAdapter("wh", None)
    session, other = adapter.session(), adapter.session()
    session.execute("CREATE TABLE t (id BIGINT)")
    with session.scan_arrow("__rocky_stage_1", [("id", "BIGINT")], [stream(50_000)], once=once) as rel:
        assert not keeps_order(session)
        assert keeps_order(other)  # session scope: a concurrent model on this database is untouched
        session.execute(f"INSERT INTO t SELECT id FROM {rel}")
    assert keeps_order(session)
    assert session.query("SELECT count(*), sum(id) FROM t") == [(50_000, sum(range(50_000)))]
    session.close()
    other.close()
    adapter.close()


def test_a_failed_copy_restores_the_order_and_a_later_model_keeps_its_order_by() -> None:
    adapter = DuckDbAdapter("wh", None)
    session = adapter.session()
    session.execute("CREATE TABLE t (id INTEGER)")
    copy = session.scan_arrow("__rocky_stage_2", [("id", "BIGINT")], [stream(10)], once=True)
    with pytest.raises(AdapterError, match=r"out of range"), session.transaction(), copy as rel:
        session.execute(f"INSERT INTO t SELECT id * 1000000000000 FROM {rel}")
    assert keeps_order(session)
    session.execute("CREATE TABLE m AS SELECT range AS id FROM range(300000) ORDER BY range DESC")
    rows = [r[0] for r in session.query("SELECT id FROM m")]
    assert rows == sorted(rows, reverse=True)
    session.close()
    adapter.close()


def test_a_setting_the_user_chose_for_the_database_survives_the_copy() -> None:
    adapter = DuckDbAdapter("wh", None)
    adapter.execute("SET GLOBAL preserve_insertion_order = false")
    session = adapter.session()
    with session.scan_arrow("__rocky_stage_3", [("id", "BIGINT")], [stream(10)], once=True):
        pass
    assert not keeps_order(session)  # RESET SESSION falls back to the database's own value
    session.close()
    adapter.close()
