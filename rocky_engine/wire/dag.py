"""The ``rocky dag`` document: the project's model DAG for orchestrators, read without a warehouse.

A superset of the published ``rocky-sdk`` ``DagOutput`` (every document validates against it): the
published fields (``id``, ``kind``, ``label``, ``pipeline``, ``depends_on``, ``strategy``, ``target``,
``freshness``) plus what ``dagster_rocky`` builds an ``AssetSpec`` from (``asset_key``, upstream models and
replicated tables, ``sql_hash``, the sidecar's description / owners / tags, assertions, configured checks).

Node ids: ``transformation:<model>`` for a model, ``replication:<pipeline>/<asset key joined by '/'>``
for a table a replication pipeline writes. One node class serves every kind (a reader that meets a kind a
newer engine adds still parses it); the kind-specific fields are absent on the other kinds.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

NodeKind = Literal["transformation", "replication"]


class DagTarget(WireModel):
    """Where a node's table lands (the published ``TargetConfig``: every part resolved)."""

    catalog: str
    schema_: str = Field(alias="schema")
    table: str


class DagStrategy(WireModel):
    """How a model materializes; the published ``StrategyConfig`` shape of its ``type``."""

    type: str
    timestamp_column: str | None = None
    unique_key: list[str] = Field(default_factory=list)
    update_columns: list[str] = Field(default_factory=list)
    partition_by: list[str] = Field(default_factory=list)


class DagFreshness(WireModel):
    """A model's freshness expectation from its sidecar (the published ``ModelFreshnessConfig``)."""

    max_lag_seconds: int | None = None


class DagAssertion(WireModel):
    """One declared assertion that applies to the node's table (``kind``: the assertion type)."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"column"})

    name: str
    kind: str
    column: str | None = None
    severity: str = "error"
    #: the pipeline that evaluates it when that is not the node's own (a quality pipeline), else absent
    pipeline: str | None = None


class DagCheck(WireModel):
    """One configured check of the node's pipeline (``kind``: ``row_count``, ``column_match``,
    ``freshness``, ``null_rate``, ``custom``, ``anomaly``); the check's result carries ``name``."""

    name: str
    kind: str
    #: the column a per-column check (``null_rate``) reads
    column: str | None = None
    severity: str = "error"
    #: the pipeline that evaluates it when that is not the node's own (a quality pipeline), else absent
    pipeline: str | None = None


class DagSource(WireModel):
    """Where a replication node's rows come from."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"components"})

    catalog: str | None = None
    schema_: str = Field(alias="schema")
    table: str
    source_type: str = ""
    #: schema-pattern components in pattern order; a variadic component holds a list
    components: dict[str, str | list[str]] = Field(default_factory=dict)


class DagNode(WireModel):
    """One node: a transformation model or a table a replication pipeline writes."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"pipeline", "depends_on", "asset_key", "checks"})

    id: str
    #: ``transformation`` or ``replication`` (read as text: a newer engine may add kinds)
    kind: str
    label: str
    pipeline: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    strategy: DagStrategy | None = None
    target: DagTarget | None = None
    freshness: DagFreshness | None = None
    #: the warehouse type of the adapter the node writes through (``duckdb``, ``postgres``, ...)
    warehouse: str | None = None
    #: the asset key path the engine proposes (``dagster_rocky``'s translator may change it)
    asset_key: list[str] = Field(default_factory=list)
    #: transformation: the models it reads (names) and the replicated tables it reads (their asset keys)
    upstream_models: list[str] = Field(default_factory=list)
    upstream_tables: list[list[str]] = Field(default_factory=list)
    sql_hash: str | None = None
    #: the sidecar's ``description``, else the SQL file's leading comment
    description: str | None = None
    owners: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    assertions: list[DagAssertion] = Field(default_factory=list)
    checks: list[DagCheck] = Field(default_factory=list)
    #: transformation: the model's SQL file, relative to the project directory
    sql_path: str | None = None
    #: replication: the source table
    source: DagSource | None = None


class DagEdge(WireModel):
    """One edge ``from`` -> ``to``: ``to`` reads what ``from`` writes."""

    from_: str = Field(alias="from")
    to: str
    edge_type: str = "data"


class DagSummary(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"total_nodes", "total_edges", "execution_layers", "counts_by_kind"}
    )

    total_nodes: int = 0
    total_edges: int = 0
    execution_layers: int = 0
    counts_by_kind: dict[str, int] = Field(default_factory=dict)


class DagResult(WireModel):
    """``rocky dag --output json``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "schema_version", "nodes", "edges", "execution_layers", "summary"}
    )

    version: str = __version__
    command: Literal["dag"] = "dag"
    schema_version: str = "1"
    nodes: list[DagNode] = Field(default_factory=list)
    edges: list[DagEdge] = Field(default_factory=list)
    #: node ids in dependency layers: a layer depends only on earlier ones
    execution_layers: list[list[str]] = Field(default_factory=list)
    summary: DagSummary = Field(default_factory=DagSummary)
