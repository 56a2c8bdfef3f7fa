"""Remove a directory tree that a child program wrote, even where the program made parts of it read-only.

Standard library only: the supervisor (``supervisor.py``, run with ``python -I -S``) imports it to remove a
connector's scratch directory when rocky died mid-attempt, and ``connectors/scratch.py`` uses it for every
other removal.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` and everything under it; False when something is left.

    Symlinks inside are removed, never followed. Directories the program made read-only are made writable
    first, so a program cannot make its directory outlive it by a ``chmod``.
    """

    def _retry(func: Callable[..., Any], target: str, _exc: Any) -> None:
        parent = os.path.dirname(target)
        try:
            os.chmod(parent, 0o700)
            if os.path.isdir(target) and not os.path.islink(target):
                os.chmod(target, 0o700)
            func(target)
        except OSError:
            pass

    try:
        shutil.rmtree(path, onerror=_retry)  # onexc needs Python 3.12
    except OSError:
        return False
    return not os.path.lexists(path)
