"""pyspark's Spark Connect exceptions as rocky ``AdapterError``s: a one-line message and a failure kind.

Read off pyspark 4.3.0 (``pyspark/errors/exceptions/connect.py``, ``sql/connect/client/core.py``) and
checked against a real server: a statement error is a ``SparkConnectGrpcException`` subclass with gRPC
status INTERNAL, an error class (``getCondition()``, e.g. ``TABLE_OR_VIEW_NOT_FOUND``) and a SQLSTATE
that follows the SQL standard, so the PostgreSQL SQLSTATE table in ``failure.py`` classifies most of them.
Transport failures carry no error class, only a gRPC status: UNAVAILABLE (refused, unknown host, TLS
against a plaintext port, server gone), UNAUTHENTICATED (wrong or missing token). This module only
classifies; it imports nothing from pyspark (duck typing), so classification costs no import.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rocky_engine.adapters.failure import classify_message, classify_sqlstate
from rocky_engine.errors import AdapterError

#: error classes whose kind differs from what their SQLSTATE says (prefix match on the dotted class)
_CONDITION_KINDS: tuple[tuple[str, str], ...] = (
    # interruptTag: whoever interrupted knows why; never retried (SQLSTATE HY008 says nothing useful)
    ("OPERATION_CANCELED", "unknown"),
    # A session listed the table's files before another session replaced them (Parquet tables): a new
    # session lists afresh, so the retry succeeds. (SQLSTATE KD001 says nothing useful.)
    ("FAILED_READ_FILE.FILE_NOT_EXIST", "transient"),
)
#: conditions after which this pyspark session must be replaced before the next statement
_RESET_CONDITIONS = ("FAILED_READ_FILE.FILE_NOT_EXIST",)
_GRPC_KINDS = {
    "UNAVAILABLE": "connection-failed",
    "UNAUTHENTICATED": "auth-failed",
    "PERMISSION_DENIED": "auth-failed",
    "DEADLINE_EXCEEDED": "transient",
    "ABORTED": "transient",
    "RESOURCE_EXHAUSTED": "quota-exceeded",
    "NOT_FOUND": "not-found",
    "INVALID_ARGUMENT": "query-rejected",
    "CANCELLED": "unknown",
}
#: client-side argument errors raised before any call (bad parameter types, malformed URL)
_CLIENT_ERRORS = ("PySparkValueError", "PySparkTypeError", "PySparkAttributeError", "PySparkKeyError")
_GRPC_DETAILS = re.compile(r'details = "([^"]*)"')
_JAVA_PREFIX = re.compile(r"^\((?:[\w$]+\.)+[\w$]+\)\s*")


class SparkAdapterError(AdapterError):
    """An AdapterError that keeps what Spark said: error class, SQLSTATE and gRPC status (when known)."""

    def __init__(
        self,
        message: str,
        *,
        failure_kind: str,
        error_class: str | None = None,
        sqlstate: str | None = None,
        grpc_status: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.error_class = error_class
        self.sqlstate = sqlstate
        self.grpc_status = grpc_status
        super().__init__(message, failure_kind=failure_kind, hint=hint)

    @property
    def needs_new_session(self) -> bool:
        """The pyspark session that raised this is dead or holds stale state: replace it."""
        return self.failure_kind == "connection-failed" or any(
            (self.error_class or "").startswith(c) for c in _RESET_CONDITIONS
        )


def _call(exc: BaseException, method: str) -> object:
    fn = getattr(exc, method, None)
    if not callable(fn):
        return None
    try:
        return fn()
    except Exception:  # a half-built exception must not hide the original error
        return None


def error_class(exc: BaseException) -> str | None:
    value = _call(exc, "getCondition")
    return value if isinstance(value, str) and value else None


def sqlstate(exc: BaseException) -> str | None:
    value = _call(exc, "getSqlState")
    return value if isinstance(value, str) and len(value) == 5 else None


def grpc_status(exc: BaseException) -> str | None:
    """The gRPC status name (``UNAVAILABLE``...) of a Connect exception or a raw ``grpc.RpcError``."""
    code = _call(exc, "getGrpcStatusCode") or _call(exc, "code")
    name = getattr(code, "name", None)
    return name if isinstance(name, str) else None


def classify(exc: BaseException) -> str:
    """The failure kind of an exception raised by pyspark's Connect client."""
    condition = error_class(exc)
    if condition:
        for prefix, kind in _CONDITION_KINDS:
            if condition.startswith(prefix):
                return kind
    state = sqlstate(exc)
    by_state = classify_sqlstate(state) if state else None
    if by_state is not None:
        return by_state
    status = grpc_status(exc)
    if status in _GRPC_KINDS:
        return _GRPC_KINDS[status]
    if type(exc).__name__ in _CLIENT_ERRORS:
        return "query-rejected"
    names = " ".join(cls.__name__ for cls in type(exc).__mro__)
    return classify_message(str(exc), names)


def first_line(exc: BaseException) -> str:
    """The first meaningful line of what Spark said, without the JVM stack trace or the Java class."""
    text = _call(exc, "getMessage")
    message = text if isinstance(text, str) and text.strip() else str(exc)
    details = _GRPC_DETAILS.search(message)
    if details and error_class(exc) is None:
        message = details.group(1)
    for line in message.splitlines():
        line = line.strip()
        if line and not line.startswith("<_") and not line.startswith("status = "):
            return _JAVA_PREFIX.sub("", line)
    return type(exc).__name__


def to_adapter_error(
    exc: BaseException, *, adapter: str, where: str, mask: Callable[[str], str] | None = None
) -> SparkAdapterError:
    """``exc`` as a SparkAdapterError whose message names the server and never carries the token.

    ``mask`` is the endpoint's ``mask(text) -> text``, applied to everything Spark said.
    """
    kind = classify(exc)
    status = grpc_status(exc)
    condition = error_class(exc)
    said = first_line(exc)
    if mask is not None:
        said = mask(said)
    hint: str | None = None
    if kind == "connection-failed" and condition is None:
        message = f"cannot reach the Spark Connect server of adapter '{adapter}' at {where}: {said}"
        hint = "check remote (sc://host:port) and that the server is running"
    elif kind == "auth-failed" and condition is None:
        message = (
            f"the Spark Connect server of adapter '{adapter}' at {where} refused the credentials ({status})"
        )
        hint = "check the token of the adapter (it is not shown) and its access to the cluster"
    elif kind == "connection-failed":
        message = f"the Spark Connect session of adapter '{adapter}' at {where} was lost: {said}"
        hint = "the server restarted or dropped the session; the statement can be retried on a new session"
    else:
        message = said
    return SparkAdapterError(
        message,
        failure_kind=kind,
        error_class=condition,
        sqlstate=sqlstate(exc),
        grpc_status=status,
        hint=hint,
    )
