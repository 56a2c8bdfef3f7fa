"""Spark Connect options -> Endpoint: URL forms (local, Databricks Connect), validation, the token apart."""

from __future__ import annotations

import uuid

import pytest

from rocky_engine import __version__
from rocky_engine.adapters.spark.options import (
    CLUSTER_ID_HEADER,
    DEFAULT_PORT,
    SparkConnectOptions,
    channel_params,
    parse,
)
from rocky_engine.errors import AdapterError

TOKEN = "dapi-secret-token-0123456789"


def test_local_url_defaults_the_port_and_names_the_server_by_host_and_port() -> None:
    endpoint = parse(SparkConnectOptions(remote="sc://spark.internal"))
    assert (endpoint.host, endpoint.port, endpoint.where) == (
        "spark.internal",
        DEFAULT_PORT,
        "spark.internal:15002",
    )
    assert endpoint.url == "sc://spark.internal:15002"
    assert endpoint.token is None
    assert dict(endpoint.params) == {"user_agent": f"rocky/{__version__}"}


def test_databricks_connect_url_and_separate_options_give_the_same_endpoint() -> None:
    from_url = parse(
        SparkConnectOptions(
            remote=f"sc://adb-1.azuredatabricks.net:443/;token={TOKEN};{CLUSTER_ID_HEADER}=0101-ab"
        )
    )
    from_options = parse(
        SparkConnectOptions(remote="sc://adb-1.azuredatabricks.net:443", token=TOKEN, cluster_id="0101-ab")
    )
    assert from_url == from_options
    assert from_url.token == TOKEN
    assert dict(from_url.params)[CLUSTER_ID_HEADER] == "0101-ab"
    # the URL pyspark parses carries neither the token nor the headers
    assert from_url.url == "sc://adb-1.azuredatabricks.net:443"
    assert channel_params(from_url, fresh_session=True)["token"] == TOKEN


def test_the_token_never_shows_in_repr_and_is_masked_in_text() -> None:
    options = SparkConnectOptions(remote="sc://h:443", token="a=b;c")
    endpoint = parse(options)
    assert "a=b;c" not in repr(options) and "a=b;c" not in repr(endpoint)
    assert endpoint.mask("header a=b;c and url a%3Db%3Bc") == "header *** and url ***"


def test_percent_encoded_values_are_decoded() -> None:
    endpoint = parse(SparkConnectOptions(remote="sc://h:443/;token=ab%3D%3D;x-custom=v%3Bw"))
    assert endpoint.token == "ab=="
    assert dict(endpoint.params)["x-custom"] == "v;w"


@pytest.mark.parametrize(
    ("remote", "fragment"),
    [
        ("https://h:443", "must start with sc://"),
        ("sc://h:443/path", "has a path"),
        ("sc://:443", "names no valid host"),
        ("sc://h:notaport", "names no valid host"),
        ("sc://user:pw@h:443", "names no valid host"),
        (f"sc://h:443/;token={TOKEN}=x", "not key=value (parameter 1 after ';')"),
        ("sc://h:443/;x-a=1;justakey", "not key=value (parameter 2 after ';')"),
    ],
)
def test_a_malformed_remote_is_rejected_without_echoing_it(remote: str, fragment: str) -> None:
    with pytest.raises(AdapterError) as info:
        parse(SparkConnectOptions(remote=remote, adapter="lake"))
    assert info.value.failure_kind == "query-rejected"
    assert fragment in info.value.message
    assert "'lake'" in info.value.message
    assert TOKEN not in str(info.value) and "pw" not in str(info.value)


def test_two_different_tokens_are_refused_and_the_same_one_twice_is_fine() -> None:
    with pytest.raises(AdapterError, match="has a token both in remote and in token"):
        parse(SparkConnectOptions(remote="sc://h/;token=one", token="two"))
    assert parse(SparkConnectOptions(remote="sc://h/;token=same", token="same")).token == "same"


def test_session_id_must_be_a_uuid4_and_worker_sessions_do_not_share_it() -> None:
    with pytest.raises(AdapterError, match="session_id of Spark adapter 'spark' is not a UUID4"):
        parse(SparkConnectOptions(remote="sc://h", session_id="not-a-uuid"))
    with pytest.raises(AdapterError, match="not a UUID4"):
        parse(SparkConnectOptions(remote="sc://h", session_id=str(uuid.uuid1())))
    sid = str(uuid.uuid4())
    endpoint = parse(SparkConnectOptions(remote="sc://h", session_id=sid))
    assert endpoint.session_id == sid
    assert channel_params(endpoint, fresh_session=False)["session_id"] == sid
    assert "session_id" not in channel_params(endpoint, fresh_session=True)


def test_ipv6_hosts_keep_their_brackets_in_the_url() -> None:
    endpoint = parse(SparkConnectOptions(remote="sc://[::1]:15003"))
    assert (endpoint.host, endpoint.port, endpoint.url) == ("::1", 15003, "sc://[::1]:15003")


def test_extra_headers_and_a_user_agent_of_ones_own_pass_through() -> None:
    endpoint = parse(
        SparkConnectOptions(remote="sc://h/;user_agent=etl", headers=(("x-databricks-org-id", "42"),))
    )
    assert dict(endpoint.params) == {"user_agent": "etl", "x-databricks-org-id": "42"}


def test_importing_the_spark_layer_loads_no_driver() -> None:
    import subprocess
    import sys

    modules = ["rocky_engine.cli.main"] + [
        f"rocky_engine.adapters.spark.{m}" for m in ("connection", "session", "capabilities", "errors")
    ]
    drivers = {"pyspark", "grpc", "pandas", "pyarrow", "py4j"}
    loaded = "{m.split('.')[0] for m in sys.modules}"
    code = f"import sys, {', '.join(modules)}; print(sorted({loaded} & {drivers!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
