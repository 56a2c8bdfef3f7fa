"""Classifying pyspark's Connect exceptions (real pyspark classes, built as the client builds them).

The statement errors a real server raises are checked end to end in ``test_spark_connection.py``; these
are the cases a local server cannot be made to produce on demand (deadlines, quotas, aborts).
"""

from __future__ import annotations

import grpc
import pytest
from pyspark.errors import PySparkValueError
from pyspark.errors.exceptions.connect import (
    AnalysisException,
    SparkConnectGrpcException,
    SparkException,
    UnknownException,
)

from rocky_engine.adapters.spark.errors import classify, first_line, to_adapter_error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (grpc.StatusCode.UNAVAILABLE, "connection-failed"),
        (grpc.StatusCode.UNAUTHENTICATED, "auth-failed"),
        (grpc.StatusCode.PERMISSION_DENIED, "auth-failed"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "transient"),
        (grpc.StatusCode.ABORTED, "transient"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "quota-exceeded"),
        (grpc.StatusCode.CANCELLED, "unknown"),
    ],
)
def test_transport_failures_are_classified_by_grpc_status(status: grpc.StatusCode, kind: str) -> None:
    assert classify(SparkConnectGrpcException(message="boom", grpc_status_code=status)) == kind


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            AnalysisException(
                "[TABLE_OR_VIEW_NOT_FOUND] x",
                errorClass="TABLE_OR_VIEW_NOT_FOUND",
                messageParameters={},
                sql_state="42P01",
            ),
            "not-found",
        ),
        (
            AnalysisException(
                "[PARSE_SYNTAX_ERROR] x",
                errorClass="PARSE_SYNTAX_ERROR",
                messageParameters={},
                sql_state="42601",
            ),
            "compile-error",
        ),
        (
            AnalysisException(
                "[INSUFFICIENT_PERMISSIONS] x",
                errorClass="INSUFFICIENT_PERMISSIONS",
                messageParameters={},
                sql_state="42501",
            ),
            "auth-failed",
        ),
        (
            SparkException(
                "[FAILED_READ_FILE.FILE_NOT_EXIST] x",
                errorClass="FAILED_READ_FILE.FILE_NOT_EXIST",
                messageParameters={},
                sql_state="KD001",
            ),
            "transient",
        ),
        (
            UnknownException(
                "[OPERATION_CANCELED] x",
                errorClass="OPERATION_CANCELED",
                messageParameters={},
                sql_state="HY008",
            ),
            "unknown",
        ),
        (
            UnknownException(
                "[INVALID_HANDLE.SESSION_CLOSED] x",
                errorClass="INVALID_HANDLE.SESSION_CLOSED",
                messageParameters={},
                sql_state="08003",
            ),
            "connection-failed",
        ),
        (PySparkValueError("bad argument"), "query-rejected"),
    ],
)
def test_statement_failures_are_classified_by_class_then_sqlstate(error: Exception, kind: str) -> None:
    assert classify(error) == kind


def test_a_grpc_rendezvous_text_becomes_its_details_line() -> None:
    text = (
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses; last error: Connection refused"\n'
        '\tdebug_error_string = "UNAVAILABLE:failed to connect"\n>'
    )
    error = SparkConnectGrpcException(message=text, grpc_status_code=grpc.StatusCode.UNAVAILABLE)
    assert first_line(error) == "failed to connect to all addresses; last error: Connection refused"


def test_the_java_class_prefix_and_leading_blank_lines_are_dropped() -> None:
    error = UnknownException(
        "\n(org.apache.spark.SparkSQLException) [OPERATION_CANCELED] Operation has been canceled.\nJVM stack",
        errorClass="OPERATION_CANCELED",
        messageParameters={},
    )
    assert first_line(error) == "[OPERATION_CANCELED] Operation has been canceled."


def test_the_token_is_masked_in_whatever_spark_said() -> None:
    error = SparkConnectGrpcException(
        message="header x-token=s3cr3t rejected", grpc_status_code=grpc.StatusCode.INTERNAL
    )
    converted = to_adapter_error(
        error, adapter="lake", where="h:443", mask=lambda t: t.replace("s3cr3t", "***")
    )
    assert "s3cr3t" not in str(converted) and "***" in str(converted)
