"""What was checked is what is loaded: each file of a batch is fingerprinted when its checks start and
verified again once they end and right before the promote (seeds/child-connectors.md, "What Rocky
guarantees"; issue 16).

Why verify instead of moving the files into a directory of Rocky's: the program runs as the same user as
Rocky, so no directory of Rocky's is out of its reach (it can ``chmod`` it back), and the staging relation
is a view that reads the files at the promote, so a copy would write every row twice. A fingerprint is:

- ``st_dev`` / ``st_ino``: a file swapped for another (``rename`` over it) is another inode;
- ``st_size``, ``st_mtime_ns`` and ``st_ctime_ns``: any write, truncation, ``utime`` or ``chmod`` moves
  the ctime, which no unprivileged process can set back;
- a BLAKE2b hash of the first and the last MiB (the Parquet footer, which says where every row group is):
  cheap on a 5 GiB file, and a content check where a file system keeps coarse timestamps.

What it cannot see (docs/connectors.md, "not a sandbox"): a change made between the last verification and
the moment the promote's INSERT reads the file. On Linux the launcher stops every process the program
started when it exits, so only a process outside Rocky's tree (one the program asked to act for it) can
still write there.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from rocky_engine.errors import ConnectorError

#: Bytes hashed at each end of a file.
SAMPLE_BYTES = 1024 * 1024


class ChangedAfterCheck(ConnectorError):
    """A file of the batch is not the one that was checked."""


@dataclass(frozen=True)
class Fingerprint:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: str


def fingerprint(path: Path) -> Fingerprint:
    """The fingerprint of the regular file at ``path`` (not following a symlink at ``path`` itself).

    Raises:
        OSError: the file cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        h = hashlib.blake2b(digest_size=16)
        h.update(os.pread(fd, SAMPLE_BYTES, 0))
        if st.st_size > SAMPLE_BYTES:
            start = max(SAMPLE_BYTES, st.st_size - SAMPLE_BYTES)
            h.update(os.pread(fd, st.st_size - start, start))
        return Fingerprint(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, h.hexdigest())
    finally:
        os.close(fd)


def verify(label: str, path: Path, expected: Fingerprint, when: str) -> None:
    """Raise :class:`ChangedAfterCheck` naming ``label`` unless ``path`` still has ``expected``."""
    try:
        now = fingerprint(path)
    except OSError as exc:
        raise ChangedAfterCheck(f"{label!r} cannot be read any more {when}: {exc.strerror or exc}") from None
    if now == expected:
        return
    if (now.dev, now.ino) != (expected.dev, expected.ino):
        what = "was replaced by another file"
    elif now.size != expected.size:
        what = f"changed size from {expected.size} to {now.size} bytes"
    else:
        what = "was modified"
    raise ChangedAfterCheck(
        f"{label!r} {what} after it was checked ({when}); what is loaded must be what was checked",
        hint="a process outside Rocky's control writes into the connector's output directory; find it",
    )
