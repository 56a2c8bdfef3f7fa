"""PostgreSQL, the server warehouse: one autocommit connection per session, reconnecting after a loss.

PostgreSQL has one catalog per connection: the catalog is the database name and ``qualified`` emits
``"schema"."table"``. Statements use ``?`` placeholders like every adapter; they are rewritten to
psycopg's ``%s`` here. A session whose connection died (server restart, ``pg_terminate_backend``) opens a
new one on its next statement, so the statement retrier can simply call again. Error messages never carry
the password: connection errors are rebuilt from host/port/dbname, and any echo of the secret is masked.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from rocky_engine.adapters.base import Column, Maintenance, Relation, quote_ident
from rocky_engine.adapters.failure import classify, first_line
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.errors import AdapterError

#: relkind -> Relation.kind for the relations a pipeline can read or replace
_RELKINDS = {"r": "table", "p": "table", "f": "table", "v": "view"}
_DEFAULT_CONNECT_TIMEOUT = 10
_QUOTED = re.compile(r'"([^"]*)"')


class PostgresAdapterError(AdapterError):
    """An AdapterError that remembers the server's SQLSTATE (materialization branches on a few)."""

    def __init__(
        self, message: str, *, failure_kind: str, sqlstate: str | None = None, hint: str | None = None
    ) -> None:
        self.sqlstate = sqlstate
        super().__init__(message, failure_kind=failure_kind, hint=hint)


class _Endpoint:
    """How to reach the server, and how to name it in a message without the secret."""

    def __init__(self, name: str, cfg: PostgresAdapterConfig) -> None:
        self.adapter = name
        self.conninfo = cfg.conninfo()
        try:
            parts = pg_conninfo.conninfo_to_dict(self.conninfo)
        except psycopg.ProgrammingError as exc:
            # The message of a malformed conninfo may quote the dsn, secret included: do not echo it.
            raise AdapterError(
                f"the dsn of PostgreSQL adapter '{name}' is not a valid connection string",
                failure_kind="query-rejected",
                hint="use postgresql://user@host:port/dbname or host=... port=... dbname=... (libpq syntax)",
            ) from exc
        self.password = str(parts.get("password") or os.environ.get("PGPASSWORD") or "")
        self.host = str(parts.get("host") or os.environ.get("PGHOST") or "localhost")
        self.port = str(parts.get("port") or os.environ.get("PGPORT") or "5432")
        self.user = str(parts.get("user") or os.environ.get("PGUSER") or "")
        self.dbname = cfg.catalog
        self.extra: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in parts and "PGCONNECT_TIMEOUT" not in os.environ:
            self.extra["connect_timeout"] = _DEFAULT_CONNECT_TIMEOUT
        if "application_name" not in parts:
            self.extra["application_name"] = "rocky"

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}/{self.dbname}"

    def mask(self, text: str) -> str:
        return text.replace(self.password, "***") if self.password else text

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        try:
            return psycopg.connect(self.conninfo, **self.extra)
        except psycopg.Error as exc:
            raise self.connect_error(exc) from None

    def connect_error(self, exc: psycopg.Error) -> AdapterError:
        """One line naming host:port/db and the reason; never the password."""
        text = self.mask(str(exc))
        low = text.lower()
        head = f"cannot connect to PostgreSQL adapter '{self.adapter}' at {self.where}"
        if "password authentication failed" in low or "password is required" in low or (
            "no password supplied" in low
        ):
            user = _quoted_user(text) or self.user
            return AdapterError(
                f"{head}: password authentication failed for user '{user}'",
                failure_kind="auth-failed",
                hint=f"check user and password of [adapter.{self.adapter}] (the password is not shown)",
            )
        if "no pg_hba.conf entry" in low or "authentication failed" in low:
            return AdapterError(
                f"{head}: the server refused this client ({_reason(text)})",
                failure_kind="auth-failed",
                hint="check the user and the server's pg_hba.conf",
            )
        if "database" in low and "does not exist" in low:
            return AdapterError(
                f"{head}: database '{self.dbname}' does not exist",
                failure_kind="not-found",
                hint=f"create it, or fix dbname of [adapter.{self.adapter}]",
            )
        if "connection refused" in low:
            reason = "connection refused"
        elif "timeout expired" in low or "timed out" in low:
            reason = "timed out"
        elif "could not translate host name" in low or "name or service not known" in low:
            reason = f"unknown host '{self.host}'"
        else:  # e.g. "the database system is starting up": still worth a retry
            reason = _reason(text)
        return AdapterError(
            f"{head}: {reason}",
            failure_kind="connection-failed",
            hint="check host/port and that the server is running",
        )


class PostgresSession:
    """One connection, opened lazily and reopened after it was lost."""

    def __init__(self, endpoint: _Endpoint, conn: psycopg.Connection[tuple[Any, ...]] | None = None) -> None:
        self._endpoint = endpoint
        self._conn = conn
        self._lock = threading.Lock()  # guards _conn against interrupt() from another thread
        #: connection attempts by this session so far, failed ones included
        self.connects = 0 if conn is None else 1

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self.connects += 1
            conn = self._endpoint.connect()
            with self._lock:
                self._conn = conn
        return conn

    def reset(self) -> None:
        """Drop the connection; the next statement opens a new one (the retrier calls this)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int | None:
        conn = self._connection()
        try:
            cur = conn.execute(_pyformat(sql) if params is not None else sql, params)
        except psycopg.Error as exc:
            raise self._error(exc) from None
        return cur.rowcount if cur.rowcount >= 0 else None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        conn = self._connection()
        try:
            cur = conn.execute(_pyformat(sql) if params is not None else sql, params)
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN/COMMIT on this connection; nested use becomes a savepoint."""
        conn = self._connection()
        try:
            with conn.transaction():
                yield
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def interrupt(self) -> None:
        with self._lock:
            conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            conn.cancel_safe(timeout=5.0)
        except (psycopg.Error, OSError):
            pass

    def close(self) -> None:
        self.reset()

    def _error(self, exc: psycopg.Error) -> PostgresAdapterError:
        message = self._endpoint.mask(first_line(str(exc)))
        if not message:
            message = type(exc).__name__
        return PostgresAdapterError(message, failure_kind=classify(exc), sqlstate=exc.sqlstate)


class PostgresAdapter(PostgresSession):
    """A PostgreSQL database as a warehouse; its own connection is autocommit."""

    type = "postgres"
    default_schema = "public"

    def __init__(self, name: str, endpoint: _Endpoint, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        super().__init__(endpoint, conn)
        self.name = name
        self.catalog = endpoint.dbname

    @classmethod
    def connect(cls, name: str, cfg: PostgresAdapterConfig) -> PostgresAdapter:
        """Open the adapter's connection now, so a wrong host or password fails before any work.

        Raises:
            AdapterError: the server cannot be reached, refuses the login, or the database is missing.
        """
        endpoint = _Endpoint(name, cfg)
        return cls(name, endpoint, endpoint.connect())

    def session(self) -> PostgresSession:
        """A new connection (opened on first use) for one worker thread."""
        return PostgresSession(self._endpoint)

    def quote(self, identifier: str) -> str:
        return quote_ident(identifier)

    def qualified(self, schema: str, table: str, catalog: str | None = None) -> str:
        # One database per connection: a catalog part would be rejected for any other database.
        return f"{quote_ident(schema)}.{quote_ident(table)}"

    def describe(self, schema: str, table: str, catalog: str | None = None) -> list[Column]:
        # format_type keeps length/precision ("character varying(20)"), which drift checks compare.
        rows = self.query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            [schema, table],
        )
        return [Column(str(r[0]), str(r[1]), bool(r[2])) for r in rows]

    def table_exists(self, schema: str, table: str, catalog: str | None = None) -> bool:
        rows = self.query(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND c.relkind IN ('r', 'p', 'f', 'v')",
            [schema, table],
        )
        return bool(rows)

    def list_schemas(self, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema' ORDER BY 1"
        )
        return [str(r[0]) for r in rows]

    def list_tables(self, schema: str, catalog: str | None = None) -> list[str]:
        rows = self.query(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'p', 'f') ORDER BY 1",
            [schema],
        )
        return [str(r[0]) for r in rows]

    def maintenance(self) -> Maintenance | None:
        return None  # the server checkpoints on its own

    def list_relations(self, catalog: str | None = None) -> list[Relation]:
        rows = self.query(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'f', 'v') AND n.nspname NOT LIKE 'pg\\_%' "
            "AND n.nspname <> 'information_schema'"
        )
        return [Relation(self.catalog, str(r[0]), str(r[1]), _RELKINDS[str(r[2])]) for r in rows]

    def ensure_schema(self, schema: str, catalog: str | None = None) -> bool:
        if schema in self.list_schemas(catalog):
            return False
        self.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        return True


@functools.lru_cache(maxsize=4096)
def _pyformat(sql: str) -> str:
    """Rewrite ``?`` placeholders to psycopg's ``%s`` (and escape literal ``%``), outside quotes/comments."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in ("'", '"'):
            end = i + 1
            while end < n:
                if sql[end] == c:
                    if end + 1 < n and sql[end + 1] == c:  # doubled quote inside the literal
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1].replace("%", "%%"))
            i = end + 1
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif c == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif c == "?":
            out.append("%s")
            i += 1
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _quoted_user(text: str) -> str | None:
    match = re.search(r'for user "([^"]*)"', text)
    return match.group(1) if match else None


def _reason(text: str) -> str:
    """The server's own reason from a libpq connection message, without the "connection to ..." preamble."""
    line = first_line(text)
    if "FATAL:" in line:
        line = line.split("FATAL:", 1)[1]
    elif "failed:" in line:
        line = line.rsplit("failed:", 1)[1]
    return _QUOTED.sub(r"'\1'", line.strip()) or "unknown error"
