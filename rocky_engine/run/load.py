"""Load pipelines: ingest a directory of CSV / Parquet / JSONL files into tables (CONTRACT section 1).

Every run reads every file in ``source_dir`` (relative to rocky.toml) and appends it: a load is not
incremental, which is why load pipelines cannot be scheduled (seeds/running-without-an-orchestrator.md).
Files are read by the warehouse itself (``Dialect.scan_files``: DuckDB's own readers); each file is
loaded in its own transaction, so a bad file fails alone and leaves no partial rows. Without ``[target]
table`` each file goes to a table named after its stem; with it, every file goes to that one table. A
file with new columns widens the table (``ADD COLUMN``); missing columns read NULL. Loads write no run
record (CONTRACT section 3); the files loaded are noted in the state store's ``loaded_files`` table for
inspection only.

A store newer than this engine under ``on_schema_mismatch = "recreate"`` runs the load "once as a full
refresh" (seeds/deployment-contract.md): from a fresh local state, with no memory of earlier loads, the
target tables of the files are rebuilt from them (dropped, then loaded), never appended to a second time.

A target whose dialect cannot read local files (``capabilities.reads_local_files``: PostgreSQL) is
refused: moving files into it needs a COPY path this engine does not have yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import TableName, WarehouseAdapter
from rocky_engine.checks.sql import scalar
from rocky_engine.config.pipelines import LoadPipeline
from rocky_engine.errors import AdapterError, ConfigError, RockyError, UsageError
from rocky_engine.logs import get_logger
from rocky_engine.run.load_output import LoadOutput
from rocky_engine.wire.load import LoadedFile

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.store import OnNewer, StateStore

#: file suffixes per format, longest first so ``x.csv.gz`` is csv and its stem is ``x``
FORMAT_SUFFIXES: dict[str, tuple[str, ...]] = {
    "csv": (".csv.gz", ".tsv.gz", ".csv", ".tsv"),
    "parquet": (".parquet", ".pq"),
    "jsonl": (".jsonl.gz", ".ndjson.gz", ".jsonl", ".ndjson"),
}

log = get_logger("load")


@dataclass(frozen=True)
class SourceFile:
    """One file to load."""

    path: Path
    #: the path as reported: ``source_dir`` as configured joined with the file name
    display: str
    format: str
    table: str
    size: int
    modified_at: datetime


def detect_format(name: str) -> tuple[str, str] | None:
    """``(format, stem)`` from a file name's suffix, or None when the suffix is not a known format."""
    lowered = name.lower()
    for fmt, suffixes in FORMAT_SUFFIXES.items():
        for suffix in suffixes:
            if lowered.endswith(suffix) and len(name) > len(suffix):
                return fmt, name[: -len(suffix)]
    return None


def discover_files(pipeline: LoadPipeline, source_dir: Path) -> list[SourceFile]:
    """The files of ``source_dir`` to load, sorted by name.

    Hidden files and ``_``-prefixed markers (``_SUCCESS``) are skipped. With ``format`` set every other
    file is read in that format; without it, files of an unknown suffix are skipped with a warning.
    """
    files: list[SourceFile] = []
    for path in sorted(source_dir.iterdir(), key=lambda p: p.name):
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        detected = detect_format(path.name)
        fmt: str
        if pipeline.format is not None:
            fmt = pipeline.format
            stem = detected[1] if detected is not None else path.stem
        elif detected is not None:
            fmt, stem = detected
        else:
            log.warning("skipping %s: unknown file type (set format = csv|parquet|jsonl to read it)", path)
            continue
        stat = path.stat()
        files.append(SourceFile(
            path=path,
            display=str(Path(pipeline.source_dir) / path.name),
            format=fmt,
            table=pipeline.target.table or stem,
            size=stat.st_size,
            modified_at=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
        ))
    return files


def load_file(
    adapter: WarehouseAdapter, pipeline: LoadPipeline, file: SourceFile, exists: bool, *,
    truncate: bool = False,
) -> int:
    """Append one file to its table in one transaction; return the rows loaded.

    ``truncate``: empty the table first, in the same transaction, so a file that fails leaves the
    table as it was (``options.truncate_first``).
    """
    target = pipeline.target
    options = pipeline.options
    dialect = adapter.dialect
    table = TableName(target.catalog, target.schema_, file.table,
                      adapter.qualified(target.schema_, file.table, target.catalog))
    scan = dialect.scan_files(
        file.format, [str(file.path)], csv_delimiter=options.csv_delimiter, csv_header=options.csv_has_header
    )
    select = f"SELECT * FROM {scan}"
    if not exists and not options.create_table:
        raise UsageError(
            f"target table {table.full_name} does not exist and options.create_table = false",
            hint="create the table first, or set create_table = true",
        )
    with adapter.transaction():
        if not exists:
            dialect.create_table_as(adapter, table.qualified, select)
            return int(scalar(adapter.query(f"SELECT COUNT(*) FROM {table.qualified}")) or 0)
        if truncate:
            dialect.truncate_table(adapter, table.qualified)
        have = {c.name.lower() for c in adapter.describe(target.schema_, file.table, target.catalog)}
        for column in dialect.describe_select(adapter, select):
            if column.name.lower() not in have:
                dialect.add_column(adapter, table.qualified, column.name, column.data_type)
        return int(dialect.insert_select(adapter, table, select) or 0)


def resolve_source_dir(project: Project, name: str, pipeline: LoadPipeline) -> Path:
    """``source_dir`` relative to rocky.toml; it must be a directory."""
    source_dir = Path(pipeline.source_dir).expanduser()
    if not source_dir.is_absolute():
        source_dir = project.root / source_dir
    if not source_dir.is_dir():
        what = "is not a directory" if source_dir.exists() else "does not exist"
        raise ConfigError(
            f"load pipeline '{name}': source_dir {source_dir} {what}",
            file=project.config.path,
            key=f"pipeline.{name}.source_dir",
            hint="create the directory or fix source_dir (relative paths start at rocky.toml's directory)",
        )
    return source_dir


def execute_load(
    project: Project,
    name: str,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    wait_for_lock: float = 0,
) -> LoadOutput:
    """Load every file of pipeline ``name``'s ``source_dir``; per-file containment. ``wait_for_lock``:
    seconds to wait for the state writer lock another process holds.

    Raises:
        UsageError: ``name`` is not a load pipeline.
        ConfigError: ``source_dir`` is missing, or the target adapter is not DuckDB.
        StateError: the state store cannot be opened as the writer.
        AdapterError: the warehouse cannot be opened or the target schema cannot be created.
    """
    from rocky_engine.adapters import open_adapter
    from rocky_engine.run.interrupt import InterruptGuard

    pipeline = project.config.pipeline(name)
    if not isinstance(pipeline, LoadPipeline):
        raise UsageError(f"pipeline '{name}' is a {pipeline.type} pipeline, not a load pipeline",
                         hint=f"run it with `rocky run --pipeline {name}`")
    t0 = time.perf_counter()
    source_dir = resolve_source_dir(project, name, pipeline)
    from rocky_engine.adapters.registry import dialect_of

    adapter_cfg = project.config.adapter(pipeline.target.adapter)
    if not dialect_of(project.config, pipeline.target.adapter).capabilities.reads_local_files:
        raise ConfigError(
            f"load pipeline '{name}' targets adapter '{pipeline.target.adapter}' of type "
            f"'{adapter_cfg.type}'; load pipelines read files with DuckDB and support DuckDB targets only",
            file=project.config.path,
            key=f"pipeline.{name}.target.adapter",
            hint="load into a DuckDB adapter (and replicate onward), or use a child connector",
        )
    catalog = getattr(adapter_cfg, "catalog", None)
    if pipeline.target.catalog == "" and catalog is not None:
        # upstream's `catalog = ""`: the adapter's default catalog (a DuckDB file's stem)
        pipeline = pipeline.model_copy(
            update={"target": pipeline.target.model_copy(update={"catalog": catalog})}
        )
    if catalog is not None and pipeline.target.catalog != catalog:
        raise ConfigError(
            f"load pipeline '{name}' targets catalog '{pipeline.target.catalog}', but adapter "
            f"'{pipeline.target.adapter}' is catalog '{catalog}'",
            file=project.config.path,
            key=f"pipeline.{name}.target.catalog",
            hint=f"set catalog = \"{catalog}\" (a DuckDB catalog is the file stem of its path)",
        )
    files = discover_files(pipeline, source_dir)
    formats = sorted({f.format for f in files})
    fmt = pipeline.format or (formats[0] if len(formats) == 1 else "mixed" if formats else "")
    out = LoadOutput(pipeline=name, source_dir=str(source_dir), format=fmt)
    on_newer: OnNewer = "recreate" if project.config.state.on_schema_mismatch == "recreate" else "refuse"
    from rocky_engine.state.remote.sync import open_synced_store

    # On a remote [state] backend the store is downloaded into first and uploaded after, like a run, so
    # loaded_files is never lost to the next run's download.
    synced = open_synced_store(
        project.state_path(), project.config.state, namespace=project.state_namespace, on_newer=on_newer,
        wait_for_lock=wait_for_lock,
    )
    with synced as store, InterruptGuard() as guard:
        if not files:
            log.warning("load pipeline '%s': no files to load in %s", name, source_dir)
        else:
            adapter = open_adapter(project.config, pipeline.target.adapter)
            guard.on_interrupt(adapter.interrupt)
            try:
                _load_all(adapter, pipeline, files, out, guard.stop.is_set, rebuild=store.downgraded)
            finally:
                adapter.close()
            out.interrupted = guard.stop.is_set() or None
        _record_loaded(store, name, files, out, clock())
        synced.upload()
    out.finish()
    out.duration_ms = int((time.perf_counter() - t0) * 1000)
    return out


def _load_all(
    adapter: WarehouseAdapter, pipeline: LoadPipeline, files: list[SourceFile], out: LoadOutput,
    stopped: Callable[[], bool], *, rebuild: bool = False,
) -> None:
    target = pipeline.target
    adapter.ensure_schema(target.schema_, target.catalog)
    existing = set(adapter.list_tables(target.schema_, target.catalog))
    if rebuild:
        _drop_targets(adapter, pipeline, sorted(existing & {f.table for f in files}))
        existing -= {f.table for f in files}
    # truncate_first: each table is emptied once, by the first file of this load that lands in it
    emptied: set[str] = set() if pipeline.options.truncate_first else {f.table for f in files}
    for file in files:
        if stopped():
            break
        full = ".".join(p for p in (target.catalog, target.schema_, file.table) if p)
        t0 = time.perf_counter()
        try:
            rows = load_file(
                adapter, pipeline, file, file.table in existing, truncate=file.table not in emptied
            )
        except RockyError as exc:
            message = exc.message if isinstance(exc, AdapterError) else str(exc)
            log.error("loading %s into %s failed: %s", file.display, file.table, message)
            out.add(LoadedFile(path=file.display, table=file.table, target=full, error=message,
                               duration_ms=int((time.perf_counter() - t0) * 1000)))
            continue
        existing.add(file.table)
        emptied.add(file.table)
        log.info("loaded %s into %s: %d rows", file.display, file.table, rows)
        out.add(LoadedFile(path=file.display, table=file.table, target=full, rows=rows, bytes=file.size,
                           duration_ms=int((time.perf_counter() - t0) * 1000)))


def _drop_targets(adapter: WarehouseAdapter, pipeline: LoadPipeline, tables: list[str]) -> None:
    """A full refresh: the target tables the files load into go first, so the files rebuild them."""
    if not tables:
        return
    target = pipeline.target
    log.warning(
        "on_schema_mismatch = recreate: rebuilding %s from the files (a full refresh: the fresh state does "
        "not know which files earlier loads appended)", ", ".join(tables),
    )
    with adapter.transaction():
        for table in tables:
            adapter.dialect.drop_table(adapter, adapter.qualified(target.schema_, table, target.catalog))


def _record_loaded(
    store: StateStore, scope: str, files: list[SourceFile], out: LoadOutput, now: datetime
) -> None:
    """Note the loaded files in ``loaded_files`` (informational: a load re-reads every file anyway)."""
    from rocky_engine.state._time import to_db

    by_display = {f.display: f for f in files}
    rows = [
        (scope, entry.path, entry.bytes, to_db(by_display[entry.path].modified_at), entry.rows, to_db(now))
        for entry in out.files
        if entry.error is None
    ]
    if not rows:
        return
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO loaded_files (scope, file_key, size_bytes, modified_at, rows, loaded_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, file_key) DO UPDATE SET "
            "size_bytes = excluded.size_bytes, modified_at = excluded.modified_at, rows = excluded.rows, "
            "loaded_at = excluded.loaded_at",
            rows,
        )
