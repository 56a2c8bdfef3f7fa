"""``[connector.NAME]`` and ``connector.toml``: every refusal, with the message a user sees, and the limits
merge and claim lifetime rules."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rocky_engine.config.connector_manifest import load_manifest
from rocky_engine.config.connectors import ConnectorLimits
from rocky_engine.connectors.limits import (
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_WALL_TIME_SECS,
    claim_ttl_hours,
    effective_limits,
)
from rocky_engine.connectors.manifest import resolve_command
from rocky_engine.errors import ConfigError
from tests.engine.connectors.kit import ConnectorProject


def write_manifest(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "connector.toml"
    path.write_text(text)
    return path


GOOD = """\
protocol_version = 0
name = "x"
command = ["./main.py"]
state_schema_version = 1
egress_hosts = []
"""


def test_manifest_loads_with_limits(tmp_path: Path) -> None:
    loaded = load_manifest(write_manifest(tmp_path, GOOD + "[limits]\nwall_time_secs = 60\n"))
    assert loaded.manifest.limits.wall_time_secs == 60
    assert loaded.manifest.egress_hosts == []
    assert loaded.directory == tmp_path.absolute()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "colour = 1\n", "unknown key 'colour' at the top level of connector.toml"),
        (GOOD + "[limits]\nwall_time = 5\n", "unknown key 'wall_time' in [limits]"),
        (GOOD.replace("egress_hosts = []\n", ""), "missing required key 'egress_hosts'"),
        (GOOD.replace("protocol_version = 0", "protocol_version = 1"),
         "protocol_version must be 0 (got 1)"),
        (GOOD.replace("protocol_version = 0", "protocol_version = true"),
         "protocol_version must be 0 (got True)"),
        (GOOD.replace('["./main.py"]', "[]"), "command must not be empty"),
        (GOOD.replace("state_schema_version = 1\n", ""), "missing required key 'state_schema_version'"),
        ("protocol_version = 0\nname = [", "invalid TOML"),
    ],
)
def test_manifest_refusals(tmp_path: Path, text: str, message: str) -> None:
    path = write_manifest(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"connector manifest .* does not exist"):
        load_manifest(tmp_path / "nope.toml")


def test_command_resolution(tmp_path: Path) -> None:
    sub = tmp_path / "bin"
    sub.mkdir()
    prog = sub / "main.py"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    text = GOOD.replace('"./main.py"', '"./bin/main.py", "--x", "y"')
    loaded = load_manifest(write_manifest(tmp_path, text))
    # relative to the manifest directory, not to the working directory; other elements untouched
    assert resolve_command(loaded, "/usr/bin") == [str(prog), "--x", "y"]
    bare = load_manifest(write_manifest(tmp_path, GOOD.replace('"./main.py"', '"sh", "-c", "true"')))
    found = resolve_command(bare, os.environ["PATH"])
    assert Path(found[0]).name == "sh" and Path(found[0]).is_absolute() and found[1:] == ["-c", "true"]
    missing = load_manifest(write_manifest(tmp_path, GOOD.replace('"./main.py"', '"no-such-prog-xyz"')))
    with pytest.raises(ConfigError, match="'no-such-prog-xyz' was not found on PATH"):
        resolve_command(missing, "/usr/bin")
    prog.chmod(0o644)
    not_exec = load_manifest(write_manifest(tmp_path, GOOD.replace('"./main.py"', '"./bin/main.py"')))
    with pytest.raises(ConfigError, match="is not executable"):
        resolve_command(not_exec, "/usr/bin")
    gone = load_manifest(write_manifest(tmp_path, GOOD))
    with pytest.raises(ConfigError, match=r"main\.py does not exist"):
        resolve_command(gone, "/usr/bin")


def test_limits_smaller_wins_and_defaults() -> None:
    merged = effective_limits(
        ConnectorLimits(wall_time_secs=1800, memory_bytes=10**9),
        ConnectorLimits(wall_time_secs=3600, output_bytes=1000, cpu_time_secs=30),
    )
    assert merged.wall_time_secs == 1800
    assert merged.output_bytes == 1000
    assert merged.cpu_time_secs == 30
    assert merged.memory_bytes == 10**9
    empty = effective_limits(ConnectorLimits(), ConnectorLimits())
    assert (empty.wall_time_secs, empty.output_bytes) == (DEFAULT_WALL_TIME_SECS, DEFAULT_OUTPUT_BYTES)
    assert empty.cpu_time_secs is None and empty.memory_bytes is None
    assert empty.request().wire() == {"wall_time_secs": 3600, "output_bytes": 5 * 1024**3}


@pytest.mark.parametrize(
    ("wall", "retries", "hours"),
    [
        (3600, 1, 3),     # 2 h of attempts + 1 h
        (60, 1, 2),       # 2 min + 1 h -> rounded up to 2 h
        (1, 0, 2),        # 1 s + 1 h -> 2 h
        (1800, 0, 2),     # 30 min + 1 h -> 2 h
        (604800, 10, 1849),
    ],
)
def test_claim_lifetime(wall: int, retries: int, hours: int) -> None:
    assert claim_ttl_hours(wall, retries) == hours


# --- through `rocky load --connector` ------------------------------------------------------------------


def test_unknown_connector_key(cp: ConnectorProject) -> None:
    cp.setup(extra="colour = 1\n")
    res = cp.load()
    assert res.returncode == 1
    assert "unknown key 'colour' in [connector.fake]" in res.stderr


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_object_store_output_refused(cp: ConnectorProject, scheme: str) -> None:
    cp.setup()
    cp.config.write_text(cp.config.read_text().replace("file://./landing", f"{scheme}://bucket/landing"))
    res = cp.load()
    assert res.returncode == 1
    assert f"output_uri {scheme}://bucket/landing is not supported yet; only file:// works" in res.stderr


def test_retries_above_ten_refused(cp: ConnectorProject) -> None:
    cp.setup(retries=11)
    res = cp.load()
    assert res.returncode == 1
    assert "connector.fake.retries" in res.stderr and "10" in res.stderr


def test_bigquery_target_refused_at_load(cp: ConnectorProject) -> None:
    cp.setup()
    text = cp.config.read_text().replace('catalog = "wh"', 'adapter = "bq", catalog = "wh"')
    cp.config.write_text(text + '\n[adapter.bq]\ntype = "bigquery"\n')
    res = cp.load()
    assert res.returncode == 1
    assert "BigQuery is not supported: it does not accept local Parquet files" in res.stderr
    assert not cp.landing.exists()


def test_postgres_target_refused_before_anything_starts(cp: ConnectorProject) -> None:
    cp.setup()
    text = cp.config.read_text().replace('catalog = "wh"', 'adapter = "pg", catalog = "wh"')
    cp.config.write_text(text + '\n[adapter.pg]\ntype = "postgres"\ndsn = "postgresql://localhost/x"\n')
    res = cp.load()
    assert res.returncode == 1
    assert "loads connector batches into DuckDB only" in res.stderr
    assert not cp.landing.exists()


def test_unset_secret_stops_before_anything_starts(cp: ConnectorProject) -> None:
    cp.setup("env", f"marker={cp.marker}", secrets=["ROCKYTEST_TOKEN"])
    res = cp.load()
    assert res.returncode == 1
    assert ("connector 'fake' declares secret ROCKYTEST_TOKEN, which is not set in rocky's environment"
            in res.stderr)
    assert not cp.marker.exists()
    assert not cp.landing.exists()
    assert not cp.state_path.exists()


def test_several_unset_secrets_are_named_in_the_plural(cp: ConnectorProject) -> None:
    cp.setup("env", f"marker={cp.marker}", secrets=["ROCKYTEST_HOST", "ROCKYTEST_PORT", "ROCKYTEST_SET"])
    res = cp.load(env={"ROCKYTEST_SET": "1"})
    assert res.returncode == 1
    assert ("connector 'fake' declares secrets ROCKYTEST_HOST, ROCKYTEST_PORT, which are not set in rocky's "
            "environment; export them before running rocky" in res.stderr)
    assert not cp.marker.exists()


def test_unknown_connector_name(cp: ConnectorProject) -> None:
    cp.setup()
    res = cp.cli("load", "--connector", "nope")
    assert res.returncode == 1
    assert "unknown connector 'nope'; available connectors: fake" in res.stderr


def test_bad_contract_refused(cp: ConnectorProject) -> None:
    cp.setup(extra='contract = { columns = [{ name = "id", kind = "x" }] }\n')
    res = cp.load()
    assert res.returncode == 1
    assert "unknown key 'kind'" in res.stderr and "connector.fake.contract.columns[0]" in res.stderr


def test_pipeline_and_connector_are_exclusive(cp: ConnectorProject) -> None:
    cp.setup()
    res = cp.cli("load", "--connector", "fake", "--pipeline", "x")
    assert res.returncode == 1
    assert "not allowed with argument" in res.stderr


def test_help_does_not_import_duckdb() -> None:
    import subprocess

    code = ("import sys; from rocky_engine.cli.main import build_parser; build_parser(); "
            "import rocky_engine.connectors.connector_run; "
            "print('duckdb' in sys.modules, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
