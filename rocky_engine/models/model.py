"""A transformation model: one SELECT plus what its sidecar says about materializing it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rocky_engine.config.atomic_merges import AtomicMergeRequest, model_request

StrategyType = Literal["full_refresh", "incremental", "merge", "view", "ephemeral", "delete_insert"]
STRATEGY_TYPES: tuple[str, ...] = (
    "full_refresh", "incremental", "merge", "view", "ephemeral", "delete_insert",
)


@dataclass(frozen=True, slots=True)
class Strategy:
    """How a model materializes (CONTRACT section 2)."""

    type: StrategyType = "full_refresh"
    timestamp_column: str | None = None
    unique_key: tuple[str, ...] = ()
    update_columns: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    #: ``[strategy] atomic`` (merge only): True, the merge must be one MERGE statement; False, a rewrite is
    #: accepted even where the pipeline sets ``atomic_merges``; None, the pipeline decides
    atomic: bool | None = None

    def atomic_request(
        self, pipeline: str, model: str, pipeline_atomic_merges: bool
    ) -> AtomicMergeRequest | None:
        """The request that this model's merge be one MERGE statement (the model's ``atomic``, else the
        pipeline's ``atomic_merges``), as ``rocky validate`` and ``rocky run`` name it; None when it does not
        ask, and never for another strategy."""
        if self.type != "merge" or not (pipeline_atomic_merges if self.atomic is None else self.atomic):
            return None
        return model_request(pipeline, model, own=self.atomic is True)


@dataclass(frozen=True, slots=True)
class ModelTarget:
    """Where a model lands; ``None`` parts take the adapter's defaults at run time."""

    catalog: str | None = None
    schema: str | None = None
    table: str = ""


@dataclass(slots=True)
class Model:
    """One model file (``models/<name>.sql``) and its optional sidecar."""

    name: str
    path: Path
    sql: str
    strategy: Strategy
    target: ModelTarget
    explicit_deps: tuple[str, ...] = ()
    max_lag_seconds: int | None = None
    depends_on: list[str] = field(default_factory=list)  # resolved model names, sorted
    #: the sidecar's ``description``, ``owners`` and ``tags`` (the engine only reports them: ``rocky dag``)
    description: str | None = None
    owners: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    _sql_hash: str | None = None

    @property
    def leading_comment(self) -> str | None:
        """The comment the SQL file opens with (``--`` lines or one ``/* */`` block), as one text: what
        describes the model when its sidecar has no ``description``."""
        text = self.sql.lstrip()
        if text.startswith("/*"):
            end = text.find("*/")
            body = text[2:end] if end > 0 else ""
            lines = [line.strip().lstrip("*").strip() for line in body.splitlines()]
        else:
            lines = []
            for line in text.splitlines():
                stripped = line.strip()
                if not stripped.startswith("--"):
                    break
                lines.append(stripped[2:].strip())
        found = " ".join(line for line in lines if line)
        return found or None

    @property
    def sql_hash(self) -> str:
        """sha256 (hex, first 16) of the SQL text; lets a reader see whether a model changed."""
        if self._sql_hash is None:
            self._sql_hash = hashlib.sha256(self.sql.encode()).hexdigest()[:16]
        return self._sql_hash
