"""The reference PostgreSQL connector's toolchain for the tests: the ``duckdb`` CLI and DuckDB's postgres
extension, installed offline from PyPI wheels (``duckdb-cli`` and ``duckdb-extension-postgres``).

They are installed with ``pip install --no-deps --target`` into ``<venv>/rocky-test-tools/``, not into the
project's environment: ``duckdb-extension-postgres`` pins ``duckdb==<its version>``, which would replace
the engine's own ``duckdb`` module. The connector only needs the CLI binary and the extension file.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The CLI and the extension must be the same DuckDB version.
DUCKDB_PG_VERSION = "1.5.5"


def toolchain_dir() -> Path:
    return Path(sys.prefix) / "rocky-test-tools" / f"duckdb-pg-{DUCKDB_PG_VERSION}"


def ensure_toolchain() -> Path:
    """A directory holding ``bin/duckdb`` (the CLI) with the extension package beside it; installs once."""
    root = toolchain_dir()
    binary = root / "bin" / "duckdb"
    if binary.exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers install once between them
        if binary.exists():
            return root
        site = root / "site"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
             f"duckdb-cli=={DUCKDB_PG_VERSION}", f"duckdb-extension-postgres=={DUCKDB_PG_VERSION}"],
            capture_output=True, text=True, timeout=600, check=False,
        )
        cli = site / "duckdb_cli" / "duckdb"
        if proc.returncode != 0 or not cli.exists():
            pytest.skip(f"cannot install duckdb-cli / duckdb-extension-postgres {DUCKDB_PG_VERSION}: "
                        f"{proc.stderr.strip()[-500:]}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_suffix(".tmp")
        # the real binary, not pip's launcher script (that one needs the --target dir on PYTHONPATH)
        os.symlink(cli, tmp)
        os.replace(tmp, binary)
    return root


@pytest.fixture(scope="session")
def duckdb_pg_toolchain() -> Path:
    """The toolchain directory; put ``<dir>/bin`` on PATH for the connector."""
    return ensure_toolchain()
