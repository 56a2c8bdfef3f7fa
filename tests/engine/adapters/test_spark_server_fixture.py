"""The Spark test server itself: bound to loopback, the JVM is the pid we signal, the archive, and CI's rule.

CI (``ROCKY_REQUIRE_SERVICES=1``) must fail, not skip, when the server cannot be had; a developer without
Java gets a skip that says what to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.spark_server import (
    CONNECT_SERVER_CLASS,
    SparkServer,
    archive_key,
    spark_home,
    usable_archive,
)

REPO = Path(__file__).resolve().parents[3]


def _listeners(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


def test_the_server_listens_on_loopback_only_and_its_pid_is_the_jvm(spark_server: SparkServer) -> None:
    assert spark_server.pid is not None
    cmdline = Path(f"/proc/{spark_server.pid}/cmdline").read_bytes().split(b"\0")
    assert Path(cmdline[0].decode()).name == "java"  # spark-submit exec'd it: SIGTERM reaches the JVM
    assert CONNECT_SERVER_CLASS.encode() in cmdline
    # 127.0.0.1 (the JVM may list it as ::ffff:127.0.0.1 in tcp6), nothing on 0.0.0.0 or ::
    listeners = _listeners(spark_server.port)
    assert listeners and listeners <= {"0100007F", "0000000000000000FFFF00000100007F"}, listeners
    assert spark_server.ready_s is not None


def test_the_command_uses_the_archive_only_when_it_exists(tmp_path: Path) -> None:
    home = spark_home()
    archive = tmp_path / "server.jsa"
    server = SparkServer(home=home, root=tmp_path, port=15999, use_archive=archive)
    assert not any(a.startswith("-XX:SharedArchiveFile") for a in " ".join(server.command()).split())
    archive.write_bytes(b"x")
    assert f"-XX:SharedArchiveFile={archive}" in " ".join(server.command())
    dumping = SparkServer(home=home, root=tmp_path, port=15999, write_archive=archive)
    options = " ".join(dumping.command())
    assert f"-XX:ArchiveClassesAtExit={archive}" in options and "SharedArchiveFile" not in options


def test_a_stale_archive_is_not_used(tmp_path: Path) -> None:
    home = spark_home()
    archive = tmp_path / "server.jsa"
    archive.write_bytes(b"archive")
    key = archive.with_suffix(".key")
    key.write_text(archive_key(home))
    assert usable_archive(home, archive) == archive
    key.write_text(archive_key(home).replace(" ", " 1", 1))  # another JVM build or jar
    assert usable_archive(home, archive) is None
    key.unlink()
    assert usable_archive(home, archive) is None


_NEEDS_SERVER = """
def test_needs_spark(spark_server):
    pass
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("required", "code", "says"), [("1", 1, "ROCKY_REQUIRE_SERVICES=1"), ("", 0, "1 skipped")]
)
def test_no_java_fails_under_require_services_and_skips_otherwise(
    tmp_path: Path, required: str, code: int, says: str
) -> None:
    test_file = tmp_path / "test_needs_spark.py"
    test_file.write_text(_NEEDS_SERVER)
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk"), "ROCKY_REQUIRE_SERVICES": required}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.fixtures.spark",
            "-rs",
            "--rootdir",
            str(tmp_path),
            str(test_file),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert says in output
    assert "java not found; run scripts/install-spark.sh as root" in output
