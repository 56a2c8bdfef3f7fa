"""``rocky discover`` (CONTRACT section 4): the source schemas and tables replication pipelines see.

Runs each replication pipeline's discovery adapter (or only ``--pipeline``'s), drops the pipeline's
``excluded_tables`` (listed separately), and reports every source once (the first pipeline that sees a
source id wins). A warehouse source's ``last_sync_at`` is the newest ``timestamp_column`` value of its
tables (``adapters.discovery``, one batched query). Warehouse adapters are opened read-only. Schemas
that carry a pattern's prefix but do not fit it are warned about on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.errors import UsageError
from rocky_engine.logs import get_logger
from rocky_engine.output import Result, md_table, render_rows
from rocky_engine.wire.base import utc_text
from rocky_engine.wire.discover import (
    DiscoverChecks,
    DiscoverResult,
    FailedSourceOutput,
    FreshnessCheckConfig,
    SourceInfo,
    TableInfo,
)

if TYPE_CHECKING:
    from rocky_engine.adapters.discovery import DiscoveredSource, FailedSource
    from rocky_engine.config import RockyConfig


class DiscoverOutput(DiscoverResult, Result):
    """The result of ``rocky discover``: its document plus the table and Markdown renderings."""

    def _rows(self) -> list[list[str]]:
        rows = []
        for s in self.sources:
            components = ", ".join(
                f"{k}={'/'.join(v) if isinstance(v, list) else v}" for k, v in s.components.items()
            )
            counts = [t.row_count for t in s.tables if t.row_count is not None]
            synced = utc_text(s.last_sync_at) if s.last_sync_at else "-"
            rows.append([s.id, s.source_type, components, str(len(s.tables)),
                         str(sum(counts)) if counts else "", synced])
        return rows

    def render_table(self) -> str:
        headers = ["source", "type", "components", "tables", "rows", "last sync"]
        text = render_rows(None, headers, self._rows()) if self.sources else "no source matches\n"
        if self.failed_sources:
            text += render_rows("failed sources", ["source", "class", "message"],
                                [[f.id, f.error_class, f.message] for f in self.failed_sources])
        if self.excluded_tables:
            names = [f"{e.source_schema}.{e.table_name}" for e in self.excluded_tables]
            text += f"excluded: {', '.join(names)}\n"
        return text

    def render_md(self) -> str:
        head = f"**rocky discover**: {len(self.sources)} source(s)\n\n"
        headers = ["source", "type", "components", "tables", "rows", "last sync"]
        return head + (md_table(headers, self._rows()) if self.sources else "")


def discover(config: RockyConfig, pipeline_name: str | None = None) -> DiscoverOutput:
    """Discover the sources of every replication pipeline (or of ``pipeline_name``).

    Raises:
        ConfigError: unknown pipeline, bad schema pattern.
        UsageError: ``pipeline_name`` is not a replication pipeline.
        AdapterError: a source warehouse cannot be read.
    """
    from rocky_engine.adapters.discovery import open_discovery
    from rocky_engine.config.pipelines import ReplicationPipeline
    from rocky_engine.replication.table_plan import apply_exclusions

    log = get_logger("discover")
    if pipeline_name is not None:
        chosen = config.pipeline(pipeline_name)
        if not isinstance(chosen, ReplicationPipeline):
            raise UsageError(
                f"pipeline '{pipeline_name}' is a {chosen.type} pipeline; discover lists replication sources",
                hint="name a replication pipeline, or omit --pipeline to discover them all",
            )
        pipelines = [(pipeline_name, chosen)]
    else:
        pipelines = [(n, p) for n, p in config.pipelines.items() if isinstance(p, ReplicationPipeline)]
    result = DiscoverOutput()
    seen: set[str] = set()
    for name, pipeline in pipelines:
        adapter = open_discovery(config, pipeline, read_only=True)
        try:
            outcome = adapter.discover(pipeline)
        finally:
            adapter.close()
        for misfit in outcome.misfits:
            log.warning("pipeline '%s': %s", name, misfit.reason)
        sources, excluded = apply_exclusions(outcome.sources, pipeline.excluded_tables)
        result.excluded_tables.extend(excluded)
        for source in sources:
            if source.id not in seen:
                seen.add(source.id)
                result.sources.append(_source_info(source, name))
        result.failed_sources.extend(_failed_info(f) for f in outcome.failed_sources)
        if result.checks is None and pipeline.checks.enabled and pipeline.checks.freshness is not None:
            result.checks = DiscoverChecks(
                freshness=FreshnessCheckConfig(threshold_seconds=pipeline.checks.freshness.threshold_seconds)
            )
    return result


def _source_info(source: DiscoveredSource, pipeline: str) -> SourceInfo:
    return SourceInfo(
        id=source.id,
        components=dict(source.components),
        source_type=source.source_type,
        last_sync_at=source.last_sync_at,
        tables=[TableInfo(name=t.name, row_count=t.row_count) for t in source.tables],
        # The pipeline that replicates this source, so an orchestrator can run `--pipeline` without asking.
        metadata={**(source.metadata or {}), "pipeline": pipeline},
    )


def _failed_info(failed: FailedSource) -> FailedSourceOutput:
    return FailedSourceOutput(
        id=failed.id, schema=failed.schema, source_type=failed.source_type, error_class=failed.error_class,
        message=failed.message, cooldown_seconds=failed.cooldown_seconds,
    )


#: the discovery cache under ``.rocky/``: the document of the last full ``rocky discover``
DISCOVER_CACHE = "discover.json"


def write_cache(dot_rocky: Path, result: DiscoverResult) -> None:
    """Keep ``result`` as the discovery cache (atomically: a reader never sees half a document). A cache
    that cannot be written costs only a warning: discover itself succeeded."""
    from rocky_engine.wire.base import document_text

    path = dot_rocky / DISCOVER_CACHE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        dot_rocky.mkdir(parents=True, exist_ok=True)
        tmp.write_text(document_text(result), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        get_logger("discover").warning("could not write the discovery cache %s: %s", path, exc)


def read_cache(dot_rocky: Path) -> DiscoverResult | None:
    """The discovery cache; None when there is none, or (with a warning) when it does not read."""
    import json

    path = dot_rocky / DISCOVER_CACHE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        get_logger("discover").warning("ignoring the discovery cache %s: %s", path, exc)
        return None
    try:
        return DiscoverResult.model_validate(json.loads(text))
    except ValueError as exc:
        get_logger("discover").warning("ignoring the discovery cache %s: it does not read (%s)", path,
                                       str(exc).splitlines()[0])
        return None
