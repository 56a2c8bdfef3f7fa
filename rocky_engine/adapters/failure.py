"""Classify warehouse exceptions into the contract's ``failure_kind`` values.

``connection-failed | auth-failed | query-rejected | transient | quota-exceeded | not-found |
compile-error | unknown``. Only ``transient`` and ``connection-failed`` are retried by the statement
retry policy; everything else is permanent and never retried.
"""

from __future__ import annotations

RETRYABLE_KINDS = frozenset({"transient", "connection-failed"})

_TRANSIENT_MARKERS = (
    "deadlock",
    "could not serialize",
    "serialization failure",
    "conflict on tuple",
    "transaction conflict",
    "timeout",
    "timed out",
    "temporarily unavailable",
    "too many connections",
)
_CONNECTION_MARKERS = (
    "connection refused",
    "could not connect",
    "connection is closed",
    "connection already closed",
    "server closed the connection",
    "terminating connection",
    "connection reset",
    "could not set lock on file",
    "no route to host",
    "the connection is lost",
    "consuming input failed",
    "ssl connection has been closed",
)
_AUTH_MARKERS = ("password authentication failed", "authentication failed", "permission denied", "no pg_hba")
_QUOTA_MARKERS = ("out of memory", "disk full", "no space left", "quota")
_NOT_FOUND_MARKERS = ("does not exist", "not found", "no such")


def classify_message(message: str, type_name: str = "") -> str:
    """Map an exception message (and class name) to a failure kind."""
    text = message.lower()
    tname = type_name.lower()
    if any(m in text for m in _AUTH_MARKERS):
        return "auth-failed"
    if any(m in text for m in _CONNECTION_MARKERS) or ("operationalerror" in tname and "connect" in text):
        return "connection-failed"
    if any(m in text for m in _TRANSIENT_MARKERS) or "transactionexception" in tname:
        return "transient"
    if any(m in text for m in _QUOTA_MARKERS) or "outofmemory" in tname:
        return "quota-exceeded"
    if "catalogexception" in tname or any(m in text for m in _NOT_FOUND_MARKERS):
        return "not-found"
    # ``type_name`` is the whole class hierarchy joined by spaces, so match names, not the suffix.
    if any(n in tname for n in ("parserexception", "binderexception", "syntaxerror", "conversionexception")):
        return "query-rejected"
    if "programmingerror" in tname or "constraintexception" in tname or "invalidinput" in tname:
        return "query-rejected"
    return "unknown"


#: Exact PostgreSQL SQLSTATEs whose kind differs from their class (the first two characters).
_SQLSTATE_EXACT: dict[str, str] = {
    "40001": "transient",  # serialization_failure
    "40P01": "transient",  # deadlock_detected
    "40003": "transient",  # statement_completion_unknown
    "55P03": "transient",  # lock_not_available
    "55006": "transient",  # object_in_use
    "53300": "transient",  # too_many_connections: a slot frees up when another client leaves
    "57P01": "connection-failed",  # admin_shutdown (server stopping, pg_terminate_backend)
    "57P02": "connection-failed",  # crash_shutdown
    "57P03": "connection-failed",  # cannot_connect_now (starting up, shutting down)
    "57P05": "connection-failed",  # idle_session_timeout
    "42601": "compile-error",  # syntax_error: the SQL itself cannot be parsed
    "42P01": "not-found",  # undefined_table
    "42703": "not-found",  # undefined_column
    "42704": "not-found",  # undefined_object
    "42883": "not-found",  # undefined_function
    "3F000": "not-found",  # invalid_schema_name
    "3D000": "not-found",  # invalid_catalog_name (database does not exist)
    "42501": "auth-failed",  # insufficient_privilege
}
_SQLSTATE_CLASS: dict[str, str] = {
    "08": "connection-failed",
    "28": "auth-failed",
    "40": "transient",
    "53": "quota-exceeded",
    "54": "query-rejected",  # program_limit_exceeded: statement too complex
    "42": "query-rejected",
    "22": "query-rejected",
    "23": "query-rejected",
    "0A": "query-rejected",
    "25": "query-rejected",
    "2B": "query-rejected",
    "44": "query-rejected",
}


def classify_sqlstate(sqlstate: str, message: str = "") -> str | None:
    """The failure kind of a PostgreSQL SQLSTATE, or None when the code says nothing useful."""
    if sqlstate == "57014":
        # query_canceled: a statement_timeout is worth retrying, a cancel from SIGINT is not.
        return "transient" if "statement timeout" in message.lower() else "unknown"
    if sqlstate in _SQLSTATE_EXACT:
        return _SQLSTATE_EXACT[sqlstate]
    return _SQLSTATE_CLASS.get(sqlstate[:2])


def classify(exc: BaseException) -> str:
    """Classify an exception raised by a warehouse driver (SQLSTATE first when the driver has one)."""
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        kind = classify_sqlstate(sqlstate, str(exc))
        if kind is not None:
            return kind
    names = " ".join(cls.__name__ for cls in type(exc).__mro__)
    return classify_message(str(exc), names)


def first_line(message: str) -> str:
    """The first line of a driver message (DuckDB appends a caret diagram)."""
    return message.strip().splitlines()[0] if message.strip() else message
