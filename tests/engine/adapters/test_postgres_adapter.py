"""The PostgreSQL adapter against a real server: protocol methods, errors, connection loss, secrets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rocky_engine.adapters.base import Column, Relation
from rocky_engine.adapters.failure import classify_sqlstate
from rocky_engine.adapters.postgres.adapter import PostgresAdapter
from rocky_engine.adapters.postgres.connection import pyformat
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.errors import AdapterError
from tests.fixtures.postgres import PG_PASSWORD, PgDatabase, PgServer


def _cfg(server: PgServer, dbname: str, **over: object) -> PostgresAdapterConfig:
    fields: dict[str, object] = {
        "type": "postgres", "host": server.host, "port": server.port, "user": server.user,
        "password": server.password, "dbname": dbname,
    }
    fields.update(over)
    return PostgresAdapterConfig.model_validate(fields)


@pytest.fixture
def pg(pg_db: PgDatabase) -> Iterator[PostgresAdapter]:
    adapter = PostgresAdapter.connect("wh", _cfg(pg_db.server, pg_db.name))
    yield adapter
    adapter.close()


# --- pure helpers (no server) ---------------------------------------------------------------------


def test_qmark_placeholders_become_pyformat_outside_literals_and_comments() -> None:
    assert pyformat("SELECT ? WHERE a = ?") == "SELECT %s WHERE a = %s"
    assert pyformat("SELECT '?', \"a?\", ? -- why?\n") == "SELECT '?', \"a?\", %s -- why?\n"
    assert pyformat("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"
    assert pyformat("SELECT 5 % 2, '50%' /* 1%? */, ?") == "SELECT 5 %% 2, '50%%' /* 1%%? */, %s"


@pytest.mark.parametrize(
    ("sqlstate", "kind"),
    [
        ("08006", "connection-failed"), ("08001", "connection-failed"), ("57P01", "connection-failed"),
        ("28P01", "auth-failed"), ("42501", "auth-failed"),
        ("40001", "transient"), ("40P01", "transient"), ("55P03", "transient"), ("53300", "transient"),
        ("53100", "quota-exceeded"), ("53200", "quota-exceeded"),
        ("42P01", "not-found"), ("42703", "not-found"), ("3F000", "not-found"),
        ("42601", "compile-error"), ("22012", "query-rejected"), ("23505", "query-rejected"),
        ("42P07", "query-rejected"), ("XX000", None),
    ],
)
def test_sqlstate_classes_map_to_failure_kinds(sqlstate: str, kind: str | None) -> None:
    assert classify_sqlstate(sqlstate) == kind


def test_query_canceled_is_transient_only_for_statement_timeouts() -> None:
    assert classify_sqlstate("57014", "canceling statement due to statement timeout") == "transient"
    assert classify_sqlstate("57014", "canceling statement due to user request") == "unknown"


# --- the protocol ---------------------------------------------------------------------------------


@pytest.mark.services
def test_identity_and_quoting(pg: PostgresAdapter, pg_db: PgDatabase) -> None:
    assert (pg.name, pg.type, pg.catalog, pg.default_schema) == ("wh", "postgres", pg_db.name, "public")
    assert pg.quote('we"ird') == '"we""ird"'
    # One database per connection: the catalog part is never emitted.
    assert pg.qualified("s", "t", "whatever") == '"s"."t"'
    assert pg.qualified("s", "t") == '"s"."t"'


@pytest.mark.services
def test_execute_returns_row_counts_and_query_fetches_rows(pg: PostgresAdapter) -> None:
    assert pg.execute("CREATE TABLE t (id int, label text)") is None
    assert pg.execute("INSERT INTO t VALUES (?, ?), (?, ?)", [1, "50% off?", 2, "b"]) == 2
    assert pg.execute("CREATE TABLE t2 AS SELECT * FROM t") == 2
    assert pg.execute("UPDATE t SET label = 'x' WHERE id = ?", [2]) == 1
    assert pg.query("SELECT id, label FROM t WHERE label LIKE '%off%' AND id = ?", [1]) == [(1, "50% off?")]
    assert pg.query("SELECT id FROM t ORDER BY id") == [(1,), (2,)]
    assert pg.query("SET search_path = public") == []


@pytest.mark.services
def test_catalog_introspection(pg: PostgresAdapter, pg_db: PgDatabase) -> None:
    assert pg.ensure_schema("mart") is True
    assert pg.ensure_schema("mart") is False
    pg.execute(
        'CREATE TABLE mart.orders (id integer NOT NULL, code varchar(20), amount numeric(10,2), '
        '"Mixed Case" timestamptz)'
    )
    pg.execute("CREATE VIEW mart.v_orders AS SELECT id FROM mart.orders")
    pg.execute("CREATE TEMP TABLE scratch (x int)")

    schemas = pg.list_schemas()
    assert "mart" in schemas and "public" in schemas
    assert not [s for s in schemas if s.startswith("pg_") or s == "information_schema"]
    assert pg.list_tables("mart") == ["orders"]
    assert pg.table_exists("mart", "orders") and pg.table_exists("mart", "v_orders")
    assert not pg.table_exists("mart", "nope") and not pg.table_exists("nope", "orders")
    assert pg.describe("mart", "orders") == [
        Column("id", "integer", False),
        Column("code", "character varying(20)", True),
        Column("amount", "numeric(10,2)", True),
        Column("Mixed Case", "timestamp with time zone", True),
    ]
    assert pg.describe("mart", "missing") == []
    relations = set(pg.list_relations())
    assert relations == {
        Relation(pg_db.name, "mart", "orders", "table"),
        Relation(pg_db.name, "mart", "v_orders", "view"),
    }


@pytest.mark.services
def test_transaction_commits_or_rolls_back(pg: PostgresAdapter) -> None:
    pg.execute("CREATE TABLE t (id int)")
    with pg.transaction():
        pg.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(AdapterError), pg.transaction():
        pg.execute("INSERT INTO t VALUES (2)")
        pg.execute("INSERT INTO missing VALUES (3)")
    assert pg.query("SELECT id FROM t") == [(1,)]


@pytest.mark.services
def test_sessions_are_separate_connections(pg: PostgresAdapter) -> None:
    s1, s2 = pg.session(), pg.session()
    try:
        pids = {pg.query("SELECT pg_backend_pid()")[0][0], s1.query("SELECT pg_backend_pid()")[0][0],
                s2.query("SELECT pg_backend_pid()")[0][0]}
        assert len(pids) == 3
        # A session's open transaction is invisible to another session until it commits.
        pg.execute("CREATE TABLE t (id int)")
        with s1.transaction():
            s1.execute("INSERT INTO t VALUES (1)")
            assert s2.query("SELECT count(*) FROM t") == [(0,)]
        assert s2.query("SELECT count(*) FROM t") == [(1,)]
    finally:
        s1.close()
        s2.close()


@pytest.mark.services
def test_interrupt_cancels_the_statement_in_flight(pg: PostgresAdapter) -> None:
    session = pg.session()
    errors: list[AdapterError] = []

    def long_statement() -> None:
        try:
            session.execute("SELECT pg_sleep(30)")
        except AdapterError as exc:
            errors.append(exc)

    worker = threading.Thread(target=long_statement)
    worker.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not pg.query(
        "SELECT 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'"
    ):
        time.sleep(0.02)
    session.interrupt()
    worker.join(10)
    assert not worker.is_alive()
    assert len(errors) == 1
    assert "canceling statement due to user request" in errors[0].message
    # A cancelled statement is not a verdict worth retrying (the run is stopping).
    assert errors[0].failure_kind == "unknown"
    session.close()


# --- failure classification of real errors ---------------------------------------------------------


@pytest.mark.services
@pytest.mark.parametrize(
    ("sql", "kind", "message"),
    [
        ("SELECT * FROM missing_table", "not-found", 'relation "missing_table" does not exist'),
        ("SELECT nocol FROM pg_class", "not-found", 'column "nocol" does not exist'),
        ("SELEC 1", "compile-error", 'syntax error at or near "SELEC"'),
        ("SELECT 1 / 0", "query-rejected", "division by zero"),
        ("SELECT 'x'::int", "query-rejected", 'invalid input syntax for type integer: "x"'),
    ],
)
def test_statement_errors_are_classified(pg: PostgresAdapter, sql: str, kind: str, message: str) -> None:
    with pytest.raises(AdapterError) as info:
        pg.execute(sql)
    assert info.value.failure_kind == kind
    assert info.value.message == message  # one line: no LINE/caret diagram


@pytest.mark.services
def test_a_stopped_server_is_connection_failed(pg: PostgresAdapter, pg_server: PgServer) -> None:
    pg.execute("SELECT 1")
    pg_server.stop()
    with pytest.raises(AdapterError) as info:
        pg.execute("SELECT 1")
    assert info.value.failure_kind == "connection-failed"
    assert info.value.message == "terminating connection due to administrator command"
    # The dead connection is replaced lazily; while the server is down that attempt fails too.
    with pytest.raises(AdapterError) as again:
        pg.execute("SELECT 1")
    assert again.value.failure_kind == "connection-failed"
    assert "connection refused" in again.value.message
    pg_server.start()
    assert pg.query("SELECT 1") == [(1,)]


@pytest.mark.services
def test_a_terminated_backend_reconnects_on_the_next_statement(
    pg: PostgresAdapter, pg_db: PgDatabase, pg_server: PgServer
) -> None:
    pid = pg.query("SELECT pg_backend_pid()")[0][0]
    assert pg_server.terminate_backends(pg_db.name) == 1
    with pytest.raises(AdapterError) as info:
        pg.query("SELECT 1")
    assert info.value.failure_kind == "connection-failed"
    assert pg.query("SELECT pg_backend_pid()")[0][0] != pid
    assert pg.connects == 2


# --- connection errors at connect time ------------------------------------------------------------


@pytest.mark.services
def test_wrong_password_is_auth_failed_and_never_echoed(pg_db: PgDatabase, pg_server: PgServer) -> None:
    wrong = "not-the-pw-987654"
    with pytest.raises(AdapterError) as info:
        PostgresAdapter.connect("wh", _cfg(pg_server, pg_db.name, password=wrong))
    assert info.value.failure_kind == "auth-failed"
    assert str(info.value) == (
        f"cannot connect to PostgreSQL adapter 'wh' at 127.0.0.1:{pg_server.port}/{pg_db.name}: password "
        "authentication failed for user 'rocky'; check user and password of [adapter.wh] (the password is "
        "not shown)"
    )
    assert wrong not in str(info.value) and PG_PASSWORD not in str(info.value)
    assert info.value.__cause__ is None  # the driver exception (and its conninfo) is not chained


@pytest.mark.services
def test_refused_connection_names_host_port_and_db(pg_server: PgServer) -> None:
    from tests.fixtures.postgres import free_port

    port = free_port()
    with pytest.raises(AdapterError) as info:
        PostgresAdapter.connect("wh", _cfg(pg_server, "shop", port=port))
    assert info.value.failure_kind == "connection-failed"
    assert str(info.value) == (
        f"cannot connect to PostgreSQL adapter 'wh' at 127.0.0.1:{port}/shop: connection refused; "
        "check host/port and that the server is running"
    )


@pytest.mark.services
def test_missing_database_is_not_found(pg_server: PgServer) -> None:
    with pytest.raises(AdapterError) as info:
        PostgresAdapter.connect("wh", _cfg(pg_server, "no_such_db"))
    assert info.value.failure_kind == "not-found"
    assert str(info.value) == (
        f"cannot connect to PostgreSQL adapter 'wh' at 127.0.0.1:{pg_server.port}/no_such_db: database "
        "'no_such_db' does not exist; create it, or fix dbname of [adapter.wh]"
    )


@pytest.mark.services
def test_dsn_configuration_connects_and_masks_the_password(pg_db: PgDatabase, pg_server: PgServer) -> None:
    dsn = f"postgresql://rocky:{PG_PASSWORD}@127.0.0.1:{pg_server.port}/{pg_db.name}"
    adapter = PostgresAdapter.connect("wh", PostgresAdapterConfig.model_validate({"dsn": dsn}))
    try:
        assert adapter.catalog == pg_db.name
        assert adapter.query("SELECT current_user") == [("rocky",)]
    finally:
        adapter.close()
    bad = f"postgresql://rocky:wrong-pw-4242@127.0.0.1:{pg_server.port}/{pg_db.name}"
    with pytest.raises(AdapterError) as info:
        PostgresAdapter.connect("wh", PostgresAdapterConfig.model_validate({"dsn": bad}))
    assert info.value.failure_kind == "auth-failed"
    assert f"at 127.0.0.1:{pg_server.port}/{pg_db.name}:" in str(info.value)
    assert "wrong-pw-4242" not in str(info.value)


def test_malformed_dsn_is_refused_without_echoing_it() -> None:
    cfg = PostgresAdapterConfig.model_validate({"dsn": "host=h password='unterminated-secret"})
    with pytest.raises(AdapterError) as info:
        PostgresAdapter.connect("wh", cfg)
    assert "unterminated-secret" not in str(info.value)
    assert str(info.value).startswith("the dsn of PostgreSQL adapter 'wh' is not a valid connection string")
