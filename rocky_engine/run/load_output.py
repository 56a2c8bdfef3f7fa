"""The result of ``rocky load`` and of ``rocky run`` on a load pipeline: its totals, status and exit code.

``{version, command: "load", pipeline, status, files[] {path, table, rows, bytes, error?}, files_loaded,
files_failed, total_rows, total_bytes, duration_ms, connector?}``. A failed file reports zero rows and
bytes (as in seeds/child-connectors.md "JSON output"). Exit codes: 0 every file loaded (or none to load),
2 some failed, 1 none loaded, 130 interrupted. ``rocky load --connector NAME`` adds the ``connector``
object, names the connector in ``pipeline``, and exits 1 when the connector run failed.
"""

from __future__ import annotations

from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.wire.load import LoadedFile, LoadResult


class LoadOutput(LoadResult, Result):
    """The result of loading a directory of files (the document is ``rocky_engine.wire.load.LoadResult``)."""

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
