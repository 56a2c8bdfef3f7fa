"""``[pipeline.NAME]`` models: the five pipeline types and their execution / schedule sections."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rocky_engine.config.base import LenientModel, StrictModel, TypedModel
from rocky_engine.config.checks import ChecksConfig
from rocky_engine.config.error_format import toml_literal

#: Pipeline types in the order error messages list them; ``replication`` is the default.
PIPELINE_TYPES: tuple[str, ...] = ("replication", "transformation", "quality", "snapshot", "load")


def _as_list(value: Any) -> Any:
    # `depends_on = "raw"` is a common slip for `["raw"]`; accept it rather than fail on a one-element list.
    return [value] if isinstance(value, str) else value


class ExecutionConfig(TypedModel):
    """``[pipeline.NAME.execution]``: how many tables run at once and when the run gives up."""

    concurrency: int | Literal["adaptive"] = 4
    fail_fast: bool = False
    error_rate_abort_pct: int = Field(default=50, ge=0, le=100)
    table_retries: int = Field(default=1, ge=0)

    @field_validator("concurrency", mode="before")
    @classmethod
    def _concurrency(cls, value: Any) -> Any:
        if value == "adaptive" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            return value
        raise PydanticCustomError(
            "rocky_concurrency",
            'concurrency must be a positive integer or "adaptive" (got {value})',
            {"value": toml_literal(value) if isinstance(value, bool | int | float | str) else "a table"},
        )


class ScheduleRetry(TypedModel):
    """``retry = { max = N }``: extra attempts of a failed scheduled run within one demand cycle."""

    max: int = Field(default=0, ge=0)


class PipelineSchedule(TypedModel):
    """``[pipeline.NAME.schedule]`` (CONTRACT section 6); cron and timezone are checked by validate."""

    cron: str | None = None
    timezone: str | None = None
    #: a list even for one upstream: `after = "hourly"` is refused, never read as ["hourly"]
    after: list[str] = Field(default_factory=list)
    freshness: bool = False
    catchup: Literal["latest", "skip"] = "latest"
    retry: ScheduleRetry = Field(default_factory=ScheduleRetry)
    timeout_minutes: int = Field(default=0, ge=0)
    enabled: bool = True


class PipelineBase(LenientModel):
    """Keys every pipeline type takes."""

    type: str
    depends_on: list[str] = Field(default_factory=list)
    checks: ChecksConfig = Field(default_factory=ChecksConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    schedule: PipelineSchedule | None = None

    @field_validator("depends_on", mode="before")
    @classmethod
    def _depends_list(cls, value: Any) -> Any:
        return _as_list(value)


# --- replication ----------------------------------------------------------------------------------------


class MetadataColumn(LenientModel):
    """A constant column added to every replicated table (``value`` is a SQL expression or literal)."""

    name: str
    type: str
    value: str


class SchemaPattern(LenientModel):
    """How source schema names split into components (``src__acme__us_west`` -> tenant, region)."""

    prefix: str = ""
    separator: str = "__"
    #: component names; a trailing ``...`` (``regions...``) makes the last one variadic
    components: list[str]


class DiscoveryRef(LenientModel):
    adapter: str


class ReplicationSource(LenientModel):
    adapter: str = "default"
    catalog: str | None = None
    schema_pattern: SchemaPattern
    discovery: DiscoveryRef | None = None
    #: concurrent range reads of one table in a cross-warehouse copy: "auto" or N >= 1
    #: (``replication.ranges``: auto is 1 below 4 cores or 1,000,000 rows)
    parallel_reads: int | Literal["auto"] = "auto"
    #: the integer/date/timestamp column range reads split on (default: the timestamp column)
    split_column: str | None = None

    @field_validator("parallel_reads", mode="before")
    @classmethod
    def _parallel_reads(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            return value
        raise PydanticCustomError(
            "rocky_parallel_reads",
            'parallel_reads must be a positive integer or "auto" (got {value})',
            {"value": toml_literal(value) if isinstance(value, bool | int | float | str) else "a table"},
        )


class Governance(LenientModel):
    """``[target.governance]``: whether a run may create the target schemas it needs."""

    #: false: a missing target schema fails the run (naming the schema) instead of being created
    auto_create_schemas: bool = True


class ReplicationTarget(LenientModel):
    adapter: str = "default"
    catalog_template: str
    schema_template: str
    separator: str = "__"
    governance: Governance = Field(default_factory=Governance)


class ReplicationPipeline(PipelineBase):
    """Copy every table of the source schemas matching a pattern into routed target schemas."""

    type: Literal["replication"] = "replication"
    strategy: Literal["incremental", "full_refresh", "merge"] = "incremental"
    merge_keys: list[str] = Field(default_factory=list)
    timestamp_column: str = "_fivetran_synced"
    metadata_columns: list[MetadataColumn] = Field(default_factory=list)
    source: ReplicationSource
    target: ReplicationTarget
    excluded_tables: list[str] = Field(default_factory=list)
    #: every merge must be one MERGE statement: a target whose capability level has none (Spark Parquet)
    #: is refused instead of rewritten (``config.atomic_merges``)
    atomic_merges: bool = False

    @model_validator(mode="after")
    def _merge_needs_keys(self) -> ReplicationPipeline:
        if self.strategy == "merge" and not self.merge_keys:
            raise PydanticCustomError(
                "rocky_merge_keys", "strategy 'merge' needs merge_keys (a list of key columns)"
            )
        if self.atomic_merges and self.strategy != "merge":
            # Only a merge has a rewrite to refuse; accepting it elsewhere would promise nothing.
            raise PydanticCustomError(
                "rocky_atomic_merges",
                "atomic_merges = true applies to strategy 'merge' only (this pipeline's strategy is "
                "'{strategy}'); remove it, or set strategy = \"merge\"",
                {"strategy": self.strategy},
            )
        return self


# --- transformation -------------------------------------------------------------------------------------


class AdapterRef(LenientModel):
    """The warehouse a quality pipeline reads (``[target] adapter``)."""

    adapter: str = "default"


class TransformationTarget(AdapterRef):
    """``[pipeline.NAME.target]`` of a transformation: the warehouse and its schema governance."""

    governance: Governance = Field(default_factory=Governance)


class TransformationPipeline(PipelineBase):
    """Run the SQL models matched by ``models`` (relative to rocky.toml) in dependency order."""

    type: Literal["transformation"] = "transformation"
    models: str = "models/**"
    target: TransformationTarget = Field(default_factory=TransformationTarget)
    #: every merge model must be one MERGE statement (a model's ``[strategy] atomic`` wins either way):
    #: a target whose capability level has none is refused instead of rewritten (``config.atomic_merges``)
    atomic_merges: bool = False


# --- quality --------------------------------------------------------------------------------------------


class QualityTable(LenientModel):
    """A table to check; without ``table`` every table of the schema is checked."""

    catalog: str
    schema_: str = Field(alias="schema")
    table: str | None = None


class QualityPipeline(PipelineBase):
    """Run checks against existing tables; with ``fail_on_error`` a failed error check exits 1."""

    type: Literal["quality"] = "quality"
    tables: list[QualityTable] = Field(min_length=1)
    checks: ChecksConfig  # required: a quality pipeline without checks has nothing to do
    #: the warehouse the tables live in (``[target] adapter``, as for transformation)
    target: AdapterRef = Field(default_factory=AdapterRef)
    #: the column the freshness check reads; None: ``_fivetran_synced`` on the tables that have it
    #: (a table without the column skips freshness, with a warning when no checked table has it)
    timestamp_column: str | None = None


# --- snapshot -------------------------------------------------------------------------------------------


class TableRef(LenientModel):
    adapter: str = "default"
    catalog: str
    schema_: str = Field(alias="schema")
    table: str

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema_}.{self.table}"


class SnapshotPipeline(PipelineBase):
    """SCD-2 history of a source table (``valid_from`` / ``valid_to``) keyed by ``unique_key``."""

    type: Literal["snapshot"] = "snapshot"
    unique_key: list[str] = Field(min_length=1)
    updated_at: str
    invalidate_hard_deletes: bool = False
    source: TableRef
    target: TableRef

    @field_validator("unique_key", mode="before")
    @classmethod
    def _unique_list(cls, value: Any) -> Any:
        return _as_list(value)


# --- load -----------------------------------------------------------------------------------------------


class LoadTarget(LenientModel):
    adapter: str = "default"
    #: "" (upstream's form for two-part warehouses): the target adapter's default catalog
    catalog: str
    schema_: str = Field(alias="schema")
    #: None: one table per file, named after the file stem
    table: str | None = None


class LoadOptions(StrictModel):
    """``[pipeline.NAME.options]`` (upstream Rocky's load options) with the meaning upstream gives them."""

    #: empty each target table before the first file of this load lands in it (same transaction)
    truncate_first: bool = False
    #: false: a target table that does not exist fails its files instead of being created
    create_table: bool = True
    #: CSV field delimiter (unset: detected from the file)
    csv_delimiter: str | None = Field(default=None, min_length=1)
    #: whether CSV files start with a header row (unset: detected from the file)
    csv_has_header: bool | None = None
    # Upstream batches INSERTs; here a file is one INSERT ... SELECT read by the warehouse, so a batch
    # size would have no effect. Refused rather than ignored (issue 15: never silently ignore a form).
    batch_size: None = None

    @field_validator("batch_size", mode="before")
    @classmethod
    def _no_batch_size(cls, value: Any) -> Any:
        raise PydanticCustomError(
            "rocky_unsupported",
            "batch_size has no meaning here: each file is loaded by one INSERT ... SELECT the warehouse "
            "reads itself; remove it",
        )


class LoadPipeline(PipelineBase):
    """Load files from a directory (csv, parquet, jsonl; else by extension) into a table."""

    type: Literal["load"] = "load"
    source_dir: str
    format: Literal["csv", "parquet", "jsonl"] | None = None
    target: LoadTarget
    options: LoadOptions = Field(default_factory=LoadOptions)

    @field_validator("format", mode="before")
    @classmethod
    def _upstream_format(cls, value: Any) -> Any:
        # upstream Rocky spells JSON Lines `json_lines`
        return "jsonl" if value == "json_lines" else value


def _pipeline_tag(value: Any) -> str:
    # `type` is optional in TOML (replication is the default), so the tag cannot be a plain field lookup.
    if isinstance(value, dict):
        tag = value.get("type", "replication")
        return tag if isinstance(tag, str) else ""
    return str(getattr(value, "type", "replication"))


PipelineConfig = Annotated[
    Annotated[ReplicationPipeline, Tag("replication")]
    | Annotated[TransformationPipeline, Tag("transformation")]
    | Annotated[QualityPipeline, Tag("quality")]
    | Annotated[SnapshotPipeline, Tag("snapshot")]
    | Annotated[LoadPipeline, Tag("load")],
    Discriminator(_pipeline_tag),
]

PIPELINE_CLASSES: dict[
    str,
    type[ReplicationPipeline | TransformationPipeline | QualityPipeline | SnapshotPipeline | LoadPipeline],
] = {
    "replication": ReplicationPipeline,
    "transformation": TransformationPipeline,
    "quality": QualityPipeline,
    "snapshot": SnapshotPipeline,
    "load": LoadPipeline,
}
