"""Reaching a PostgreSQL server: the connection string, connection errors without the secret, placeholders.

Error messages never carry the password: connection errors are rebuilt from host/port/dbname, and any
echo of the secret is masked. Statements use ``?`` placeholders like every adapter; they are rewritten to
psycopg's ``%s`` here.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from rocky_engine.adapters.failure import first_line
from rocky_engine.config.adapters import PostgresAdapterConfig
from rocky_engine.errors import AdapterError
from rocky_engine.redact import MIN_BYTES, known

_DEFAULT_CONNECT_TIMEOUT = 10
_QUOTED = re.compile(r'"([^"]*)"')


class PostgresAdapterError(AdapterError):
    """An AdapterError that remembers the server's SQLSTATE (materialization branches on a few)."""

    def __init__(
        self, message: str, *, failure_kind: str, sqlstate: str | None = None, hint: str | None = None
    ) -> None:
        self.sqlstate = sqlstate
        super().__init__(message, failure_kind=failure_kind, hint=hint)


class Endpoint:
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
        """``text`` without the connection string, the password, or any other secret of the project."""
        text = known()(text)  # names a secret as the config does (``${PG_DSN}``)
        if len(self.conninfo) >= MIN_BYTES:  # a conninfo the redactor does not know (PG* variables)
            text = text.replace(self.conninfo, f"${{adapter.{self.adapter}.dsn}}")
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


@functools.lru_cache(maxsize=4096)
def pyformat(sql: str) -> str:
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
