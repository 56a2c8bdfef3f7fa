"""``rocky validate`` checks every connector manifest with the loader ``rocky load --connector`` uses
(CONTRACT section 0: unknown keys in connector manifests are errors), through the real CLI.

Each refusal is a ``V019`` error about ``connector.<name>.manifest`` whose message names the connector, the
manifest file, the key and the fix; ``valid`` is false and the exit code 1. ``rocky load`` refuses the same
manifest with the same words, and a good manifest still validates.
"""

from __future__ import annotations

import pytest

from tests.engine.connectors.kit import ConnectorProject

GOOD = """\
protocol_version = 0
name = "fake"
command = ["./prog.py", "ok"]
state_schema_version = 1
egress_hosts = ["api.example.com"]
"""

VALID_KEYS = "valid keys: protocol_version, name, command, state_schema_version, egress_hosts, limits"


def write_manifest(cp: ConnectorProject, text: str) -> str:
    path = cp.root / "conn" / "connector.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            GOOD + "bogus = 1\n",
            "bogus: unknown key 'bogus' at the top level of connector.toml; " + VALID_KEYS
            + "; fix the spelling or remove the key",
            id="unknown-key",
        ),
        pytest.param(
            GOOD + "[limits]\nwall_time = 5\n",
            "limits.wall_time: unknown key 'wall_time' in [limits]; valid keys: wall_time_secs, "
            "cpu_time_secs, memory_bytes, output_bytes; fix the spelling or remove the key",
            id="unknown-limit",
        ),
        pytest.param(
            GOOD.replace('egress_hosts = ["api.example.com"]\n', ""),
            "egress_hosts: missing required key 'egress_hosts' at the top level of connector.toml; list the "
            "hosts the program calls (egress_hosts = [\"api.example.com\"]), or write egress_hosts = [] for "
            "a program that calls no host",
            id="no-egress-hosts",
        ),
        pytest.param(
            GOOD.replace("protocol_version = 0", "protocol_version = 1"),
            "protocol_version: protocol_version must be 0 (got 1); this rocky speaks child connector "
            "protocol 0 only",
            id="protocol-1",
        ),
        pytest.param(
            GOOD.replace('["./prog.py", "ok"]', "[]"),
            "command: command must not be empty; write the program and its arguments",
            id="empty-command",
        ),
        pytest.param(
            GOOD + "[limits]\nwall_time_secs = 0\n",
            "limits.wall_time_secs: invalid value 0: input should be greater than or equal to 1",
            id="bad-limit",
        ),
        pytest.param("protocol_version = 0\nname = [", "invalid TOML", id="not-toml"),
    ],
)
def test_validate_refuses_each_manifest_problem(cp: ConnectorProject, text: str, expected: str) -> None:
    cp.setup("ok")
    path = write_manifest(cp, text)
    res = cp.cli("validate")
    assert res.returncode == 1, res.stderr
    doc = res.json
    assert doc["valid"] is False
    [msg] = doc["messages"]
    assert (msg["severity"], msg["code"], msg["field"]) == ("error", "V019", "connector.fake.manifest")
    assert msg["message"].startswith(f"connector 'fake': {path}: "), msg["message"]
    assert expected in msg["message"]
    # one loader: `rocky load` refuses the same manifest in the same words, before anything starts
    load = cp.load()
    assert load.returncode == 1 and load.stdout == ""
    assert msg["message"].removeprefix("connector 'fake': ") in load.stderr
    assert not cp.landing.exists()


def test_validate_reports_a_missing_manifest(cp: ConnectorProject) -> None:
    cp.setup("ok")
    (cp.root / "conn" / "connector.toml").unlink()
    res = cp.cli("validate")
    assert res.returncode == 1
    [msg] = res.json["messages"]
    assert (msg["code"], msg["field"]) == ("V019", "connector.fake.manifest")
    assert msg["message"] == (
        f"connector 'fake': connector manifest {cp.root / 'conn' / 'connector.toml'} does not exist; fix "
        "`manifest` in [connector.fake] (relative paths start at rocky.toml's directory) or add the "
        "connector.toml"
    )


def test_validate_passes_a_valid_manifest(cp: ConnectorProject) -> None:
    cp.setup("ok", manifest_extra="[limits]\nwall_time_secs = 60\n")
    res = cp.cli("validate")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.json["valid"] is True and res.json["messages"] == []


def test_each_connector_is_named_in_its_own_message(cp: ConnectorProject) -> None:
    cp.setup("ok", extra="""
        [connector.other]
        manifest = "conn/other.toml"
        output_uri = "file://./landing-other"
        target = { catalog = "wh", schema = "raw", table = "other" }
        """)
    other = cp.root / "conn" / "other.toml"
    other.write_text(GOOD.replace("protocol_version = 0", 'protocol_version = "0"'))
    res = cp.cli("validate")
    assert res.returncode == 1
    [msg] = res.json["messages"]
    assert msg["field"] == "connector.other.manifest"
    assert msg["message"].startswith(
        f"connector 'other': {other}: protocol_version: protocol_version must be 0 (got '0')")
