"""The reference PostgreSQL connector's toolchain for the tests: the ``duckdb`` CLI and DuckDB's postgres
extension, installed offline from PyPI wheels (``duckdb-cli`` and ``duckdb-extension-postgres``).

``make test``'s setup installs them once (``python -m tests.engine.connectors.toolchain``, cached by a
stamp under .venv); the tests only look for them and skip (fail under ROCKY_REQUIRE_SERVICES=1) when they
are missing. They go into ``<venv>/rocky-test-tools/`` with ``pip install --no-deps --target``, not into
the project's environment: ``duckdb-extension-postgres`` pins ``duckdb==<its version>``, which would
replace the engine's own ``duckdb`` module. The connector only needs the CLI binary and the extension file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.services import required, unavailable

#: The CLI and the extension must be the same DuckDB version.
DUCKDB_PG_VERSION = "1.5.5"


def toolchain_dir() -> Path:
    return Path(sys.prefix) / "rocky-test-tools" / f"duckdb-pg-{DUCKDB_PG_VERSION}"


def install_toolchain() -> Path:
    """Install the CLI and the extension (once); raises RuntimeError with pip's reason when it cannot."""
    root = toolchain_dir()
    binary = root / "bin" / "duckdb"
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
        raise RuntimeError(f"cannot install duckdb-cli / duckdb-extension-postgres {DUCKDB_PG_VERSION}: "
                           f"{proc.stderr.strip()[-500:]}")
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    # the real binary, not pip's launcher script (that one needs the --target dir on PYTHONPATH)
    os.symlink(cli, tmp)
    os.replace(tmp, binary)
    return root


@pytest.fixture(scope="session")
def duckdb_pg_toolchain() -> Path:
    """The toolchain directory; put ``<dir>/bin`` on PATH for the connector. Installs nothing."""
    root = toolchain_dir()
    if not (root / "bin" / "duckdb").exists():
        unavailable("duckdb CLI + postgres extension", f"{root} missing; run `make test-deps`")
    return root


def main(argv: list[str]) -> int:
    """``python -m tests.engine.connectors.toolchain [STAMP]``: install, then touch STAMP (make's cache)."""
    try:
        install_toolchain()
    except RuntimeError as exc:
        # no stamp: the next `make test` tries again
        if required():
            print(f"error: {exc} (ROCKY_REQUIRE_SERVICES=1)", file=sys.stderr)
            return 1
        print(f"warning: {exc}; the reference PostgreSQL connector tests will skip", file=sys.stderr)
        return 0
    if argv:
        Path(argv[0]).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
