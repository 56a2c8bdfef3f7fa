"""The load document printed by ``rocky load`` and ``rocky run`` on a load pipeline.

``{version, command: "load", pipeline, status, files[] {path, table, rows, bytes, error?}, files_loaded,
files_failed, total_rows, total_bytes, duration_ms, connector?}``. A failed file reports zero rows and
bytes (as in seeds/child-connectors.md "JSON output"). Exit codes: 0 every file loaded (or none to load),
2 some failed, 1 none loaded, 130 interrupted. ``rocky load --connector NAME`` adds the ``connector``
object, names the connector in ``pipeline``, and exits 1 when the connector run failed.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.output import Result, WireModel, md_table, render_rows

LoadStatus = Literal["Success", "PartialFailure", "Failure"]


class LoadedFile(WireModel):
    """One file of a load."""

    path: str
    table: str
    rows: int = 0
    bytes: int = 0
    error: str | None = None
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"rows", "bytes"})


ConnectorStatus = Literal["loaded", "skipped", "failed"]


class ConnectorInfo(WireModel):
    """The ``connector`` object of ``rocky load --connector NAME`` (child-connectors.md "JSON output")."""

    name: str
    status: ConnectorStatus = "failed"
    attempts: int = 0
    commit_seq_before: int = 0
    commit_seq_after: int = 0
    adopted_expired_claim: bool = False
    egress_hosts: list[str] = Field(default_factory=list)
    #: why the run failed; only on failure
    error: str | None = None
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"name", "status", "attempts", "commit_seq_before", "commit_seq_after", "adopted_expired_claim",
         "egress_hosts"}
    )


class LoadOutput(Result):
    """The result of loading a directory of files."""

    version: str = __version__
    command: str = "load"
    pipeline: str
    status: LoadStatus = "Success"
    files: list[LoadedFile] = Field(default_factory=list)
    files_loaded: int = 0
    files_failed: int = 0
    total_rows: int = 0
    total_bytes: int = 0
    duration_ms: int = 0
    interrupted: bool | None = None
    #: set by ``rocky load --connector``; its status decides the load's status
    connector: ConnectorInfo | None = None

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "pipeline", "status", "files", "files_loaded", "files_failed", "total_rows",
         "total_bytes", "duration_ms"}
    )

    def add(self, entry: LoadedFile) -> None:
        """Append a file outcome and keep the totals in step."""
        self.files.append(entry)
        if entry.error is None:
            self.files_loaded += 1
            self.total_rows += entry.rows
            self.total_bytes += entry.bytes
        else:
            self.files_failed += 1

    def finish(self) -> None:
        """Derive ``status`` from the counts (a connector run: from the connector's status)."""
        if self.connector is not None:
            self.status = "Failure" if self.connector.status == "failed" else "Success"
        elif self.files_failed == 0:
            self.status = "Success"
        elif self.files_loaded > 0:
            self.status = "PartialFailure"
        else:
            self.status = "Failure"

    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return {"Success": 0, "PartialFailure": 2, "Failure": 1}[self.status]

    def render_table(self) -> str:
        lines = [
            f"load {self.pipeline}  status={self.status}  files={self.files_loaded} loaded, "
            f"{self.files_failed} failed  rows={self.total_rows}  bytes={self.total_bytes}  "
            f"duration={self.duration_ms / 1000:.2f}s" + ("  INTERRUPTED" if self.interrupted else "")
        ]
        if self.connector is not None:
            c = self.connector
            adopted = "  (adopted an expired claim)" if c.adopted_expired_claim else ""
            lines.append(
                f"connector {c.name}: {c.status}, {c.attempts} attempt(s), commit_seq {c.commit_seq_before} "
                f"-> {c.commit_seq_after}{adopted}" + (f"\nerror: {c.error}" if c.error else "")
            )
        rows = [[f.path, f.table, str(f.rows), str(f.bytes), f.error or ""] for f in self.files]
        if rows:
            lines.append(render_rows(None, ["file", "table", "rows", "bytes", "error"], rows))
        return "\n".join(lines) + "\n"

    def render_md(self) -> str:
        head = (
            f"**rocky load** `{self.pipeline}`: {self.status}, {self.files_loaded} file(s) loaded, "
            f"{self.files_failed} failed, {self.total_rows} rows\n\n"
        )
        rows = [[f.path, f.table, str(f.rows), str(f.bytes), f.error or ""] for f in self.files]
        return head + (md_table(["file", "table", "rows", "bytes", "error"], rows) if rows else "")
