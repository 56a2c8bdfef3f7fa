"""CI (``ROCKY_REQUIRE_SERVICES=1``, set by ``.ci/run``) fails when a service cannot be had; a developer
machine skips. Proven with a real pytest run against a broken or missing PostgreSQL (``ROCKY_TEST_PG_BIN``)
and a real run of ``scripts/install-test-deps.sh`` that cannot install anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_NEEDS_PG = """
def test_needs_postgres(pg_server):
    pass
"""


_BROKEN = "initdb: could not create data directory: disk on fire"


def _run_pytest(tmp_path: Path, pg_bin: Path, required: str) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_needs_pg.py"
    test_file.write_text(_NEEDS_PG)
    env = {**os.environ, "ROCKY_TEST_PG_BIN": str(pg_bin), "ROCKY_REQUIRE_SERVICES": required}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.fixtures.postgres",
         "-rs", "--rootdir", str(tmp_path), str(test_file)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )


def test_postgres_that_cannot_start_fails_the_run(tmp_path: Path) -> None:
    # Outside tmp_path (0700): as root the fixture runs initdb as the postgres user, who must reach it.
    bin_dir = Path(tempfile.mkdtemp(prefix="rocky-broken-pg-"))
    try:
        bin_dir.chmod(0o755)
        initdb = bin_dir / "initdb"
        initdb.write_text(f"#!/bin/sh\necho '{_BROKEN}' >&2\nexit 1\n")
        initdb.chmod(0o755)
        proc = _run_pytest(tmp_path, bin_dir, "1")
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"initdb failed: {_BROKEN}" in output
    assert "1 error" in output


@pytest.mark.parametrize(
    ("required", "code", "says"), [("1", 1, "ROCKY_REQUIRE_SERVICES=1"), ("", 0, "1 skipped")]
)
def test_missing_postgres_fails_under_require_services_and_skips_otherwise(
    tmp_path: Path, required: str, code: int, says: str
) -> None:
    proc = _run_pytest(tmp_path, tmp_path / "no-such-pg", required)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert says in output
    assert "PostgreSQL" in output and "binaries (initdb, pg_ctl) not found" in output


@pytest.mark.parametrize(("required", "code", "says"), [("1", 1, "error: "), ("", 0, "warning: ")])
def test_install_test_deps_fails_under_require_services_when_it_cannot_install(
    tmp_path: Path, required: str, code: int, says: str
) -> None:
    # A PATH with no redis-server and no apt-get, run as a user that is not root: nothing can be installed.
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("ls", "id"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    cmd = [shutil.which("bash") or "/bin/bash", str(REPO / "scripts" / "install-test-deps.sh")]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "util-linux setpriv is needed to drop root"
        cmd = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd]
    env = {"PATH": str(tools), "ROCKY_REQUIRE_SERVICES": required}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr
    assert "redis-server missing and cannot be installed here (need root and apt-get)" in proc.stderr
