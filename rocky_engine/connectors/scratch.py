"""Scratch directories: one per attempt, ``<output_dir>/<run_id>-<attempt>``, readable by its owner only.

The scratch directory is the program's working directory, ``HOME``, ``TMPDIR`` and ``output_dir``, so it
can hold caches and credential files: mode 0700. Rocky removes exactly one scratch directory at a time,
never anything else under ``output_uri``:

- a failed attempt's directory, right away (when Rocky itself dies mid-attempt, even by ``kill -9``, the
  launcher's supervisor removes it once the program's processes are gone);
- a successful run's directory after the state commit, unless ``keep_scratch = true``;
- never the directory of a run that failed after its program succeeded (it shows what was, or may have
  been, loaded).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rocky_engine.errors import ConnectorError
from rocky_engine.logs import get_logger
from rocky_engine.process.removal import remove_tree

log = get_logger("connector")


def create_scratch(output_dir: Path, run_id: str, attempt: int) -> Path:
    """Create ``<output_dir>/<run_id>-<attempt>`` with mode 0700 (the parent is created when missing).

    Raises:
        ConnectorError: the directory cannot be created (or already exists: run ids never repeat).
    """
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConnectorError(
            f"cannot create the connector output directory {output_dir}: {exc}",
            hint="fix output_uri or the permissions of its parent directory",
        ) from None
    path = output_dir / f"{run_id}-{attempt}"
    try:
        os.mkdir(path, 0o700)
        # mkdir's mode is filtered by the umask; set it exactly.
        os.chmod(path, 0o700)
    except OSError as exc:
        raise ConnectorError(f"cannot create the scratch directory {path}: {exc}") from None
    return path.absolute()


def directory_bytes(path: Path) -> int:
    """The bytes of every regular file under ``path`` (symlinks are not followed, vanished files skipped)."""
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        # directories the program made unreadable are simply not counted (os.walk skips them)
        del dirs
    return total


def remove_scratch(path: Path) -> bool:
    """Remove one scratch directory; returns False (with a warning) when something could not be removed.

    Symlinks inside are removed, never followed. Directories the program made read-only are made writable
    first, so a program cannot make its scratch directory outlive the run by a ``chmod``.
    """
    if not path.exists() and not path.is_symlink():
        return True
    if path.is_symlink():  # the program swapped its directory for a link: remove the link, not its target
        try:
            path.unlink()
        except OSError as exc:
            log.warning("could not remove %s: %s; remove it by hand", path, exc)
            return False
        return True
    if not remove_tree(path):
        log.warning("could not remove scratch directory %s completely; remove it by hand", path)
        return False
    return True
