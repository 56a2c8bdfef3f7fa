"""The load document, printed by ``rocky load`` and by ``rocky run`` on a load pipeline.

``{version, command: "load", pipeline, status, source_dir, format, files[] {path, file, table, target, rows,
rows_loaded, bytes, bytes_read, duration_ms, error?}, files_loaded, files_failed, total_rows, total_bytes,
duration_ms, interrupted?, connector?}``: ``file``, ``rows_loaded`` and ``bytes_read`` are the published
client's names of ``path``, ``rows`` and ``bytes`` (written under both). A failed file reports zero
rows and bytes (seeds/child-connectors.md "JSON output"); ``rocky load --connector NAME`` adds the
``connector`` object and names the connector in ``pipeline``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel, published

LoadStatus = Literal["Success", "PartialFailure", "Failure"]
ConnectorStatus = Literal["loaded", "skipped", "failed"]


class LoadedFile(WireModel):
    """One file of a load."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"rows", "bytes", "target", "duration_ms"})

    path: str = published("file")
    table: str
    #: the target table's full name (``catalog.schema.table``)
    target: str = ""
    rows: int = published("rows_loaded", 0)
    bytes: int = published("bytes_read", 0)
    #: the time the file took to load; a connector batch's files share the batch's staging-to-INSERT time
    #: (its one INSERT reads every file at once)
    duration_ms: int = 0
    error: str | None = None


class ConnectorInfo(WireModel):
    """The ``connector`` object of ``rocky load --connector NAME``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"name", "status", "attempts", "commit_seq_before", "commit_seq_after", "adopted_expired_claim",
         "egress_hosts"}
    )

    name: str
    status: ConnectorStatus = "failed"
    attempts: int = 0
    commit_seq_before: int = 0
    commit_seq_after: int = 0
    adopted_expired_claim: bool = False
    #: the hosts the manifest says the program calls (stated, not enforced)
    egress_hosts: list[str] = Field(default_factory=list)
    #: why the run failed; only on failure
    error: str | None = None


class LoadResult(WireModel):
    """The result of loading a directory of files (or one connector batch)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "pipeline", "status", "files", "files_loaded", "files_failed", "total_rows",
         "total_bytes", "duration_ms", "source_dir", "format"}
    )

    version: str = __version__
    command: Literal["load"] = "load"
    pipeline: str
    status: LoadStatus = "Success"
    #: the directory the files were read from (``""`` for a connector batch)
    source_dir: str = ""
    #: the pipeline's ``format``, else the one format of the files, ``mixed`` for several (``""``: none)
    format: str = ""
    files: list[LoadedFile] = Field(default_factory=list)
    files_loaded: int = 0
    files_failed: int = 0
    total_rows: int = 0
    total_bytes: int = 0
    duration_ms: int = 0
    interrupted: bool | None = None
    connector: ConnectorInfo | None = None
