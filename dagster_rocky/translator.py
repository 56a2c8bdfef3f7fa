"""``RockyDagsterTranslator``: how a discovered table or a ``rocky dag`` model becomes a Dagster asset.

Subclass it and override any ``get_*`` method to change keys, groups, tags or metadata; pass the same
instance to ``load_rocky_assets``, the asset factories and ``rocky_source_sensor`` so the keys agree.
Replicated tables go through ``get_asset_key(source, table)`` and friends (the published signatures);
models (``rocky dag`` nodes) go through ``get_dag_node_*`` and ``get_dag_group_name`` (published names).

A list-valued (variadic) component is one value joined with ``__`` everywhere: in the key, the group
and the tags, so a source never lands in one group under one spelling and carries a tag of another.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

from dagster_rocky.types import DagNode, DiscoverChecks, SourceInfo, TableInfo

_NAME_BAD = re.compile(r"[^A-Za-z0-9_]")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_OWNER_TEAM_BAD = re.compile(r"[^A-Za-z0-9_]")


@functools.lru_cache(maxsize=64)
def _time_window_policy(seconds: int) -> dg.FreshnessPolicy:
    # One policy object per threshold: tens of thousands of tables share it.
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=seconds))


def component_value(value: str | list[str]) -> str:
    """A component as one string: a variadic (list) component is joined with ``__``."""
    return value if isinstance(value, str) else "__".join(value)


def safe_name(text: str, fallback: str = "rocky") -> str:
    """``text`` as a valid Dagster name (``^[A-Za-z0-9_]+$``): other characters become ``_``."""
    cleaned = _NAME_BAD.sub("_", text).strip("_") or fallback
    return f"_{cleaned}" if cleaned[0].isdigit() else cleaned


def safe_tag_value(text: str) -> str:
    """``text`` as a valid Dagster tag value (63 characters of ``[A-Za-z0-9_.-]``)."""
    return _TAG_BAD.sub("_", text)[:63]


def safe_tag_key(text: str) -> str:
    return (_TAG_BAD.sub("_", text)[:63]) or "_"


class RockyDagsterTranslator:
    """The default mapping: ``AssetKey([source_type, *component values, table])``, grouped by tenant."""

    def get_asset_key(self, source: SourceInfo, table: TableInfo) -> dg.AssetKey:
        """``[source_type, *component values, table.name]``; list components joined with ``__``."""
        return dg.AssetKey(
            [source.source_type, *(component_value(v) for v in source.components.values()), table.name]
        )

    def get_group_name(self, source: SourceInfo) -> str:
        """The first non-empty component (the tenant, by convention; a list joined with ``__``), else the
        source type."""
        for value in source.components.values():
            text = component_value(value)
            if text:
                return safe_name(text)
        return safe_name(source.source_type)

    def get_tags(self, source: SourceInfo, table: TableInfo) -> dict[str, str]:
        """``rocky/source_type`` and one ``rocky/<component>`` tag per component (the published signature:
        the table is passed so an override can tag per table)."""
        tags = {"rocky/source_type": safe_tag_value(source.source_type)}
        for name, value in source.components.items():
            tags[f"rocky/{safe_tag_key(name)}"] = safe_tag_value(component_value(value))
        return tags

    def get_metadata(self, source: SourceInfo, table: TableInfo) -> dict[str, Any]:
        """Where the table comes from: source id and type, components, last sync, row count, and every
        ``source.metadata`` entry the discovery adapter reported (``fivetran.service`` ...) under its own
        key (structured values as JSON metadata)."""
        meta: dict[str, Any] = {
            "rocky/source_id": source.id,
            "rocky/source_type": source.source_type,
            "rocky/table": table.name,
        }
        for name, value in source.components.items():
            meta[f"rocky/component/{name}"] = component_value(value)
        if source.last_sync_at is not None:
            meta["rocky/last_sync_at"] = source.last_sync_at.isoformat()
        if table.row_count is not None:
            meta["rocky/row_count"] = table.row_count
        for key, value in source.metadata.items():
            if key not in meta:
                meta[key] = dg.MetadataValue.json(value) if isinstance(value, dict | list) else value
        return meta

    def get_asset_deps(self, source: SourceInfo, table: TableInfo) -> Sequence[dg.AssetKey]:
        """Upstream assets of a replicated table; none by default (the source lives outside Dagster)."""
        return []

    def get_description(self, source: SourceInfo, table: TableInfo) -> str | None:
        return f"{table.name} replicated by Rocky from {source.source_type} source {source.id}"

    def get_partition_key(self, source: SourceInfo) -> str | None:
        """The dynamic partition a source belongs to in tenant mode; None: decided by the tenant component."""
        return None

    def get_freshness_policy(
        self, source: SourceInfo, table: TableInfo, checks: DiscoverChecks | None
    ) -> dg.FreshnessPolicy | None:
        """A time-window freshness policy from discover's ``checks.freshness.threshold_seconds``."""
        if checks is None or checks.freshness is None:
            return None
        return _time_window_policy(checks.freshness.threshold_seconds)

    def get_asset_spec(
        self,
        source: SourceInfo,
        table: TableInfo,
        checks: DiscoverChecks | None = None,
        extra_tags: Mapping[str, str] | None = None,
    ) -> dg.AssetSpec:
        """The whole spec; the other ``get_*`` methods feed it."""
        group = self._group_of(source)
        if type(self).get_tags is RockyDagsterTranslator.get_tags:
            tags = self._source_tags(source)  # the default does not read the table: once per source
        else:
            tags = self.get_tags(source, table)
        return dg.AssetSpec(
            key=self.get_asset_key(source, table),
            deps=list(self.get_asset_deps(source, table)),
            description=self.get_description(source, table),
            metadata=self.get_metadata(source, table),
            group_name=group,
            tags={**tags, **extra_tags} if extra_tags else tags,
            kinds={"rocky"},
            freshness_policy=self.get_freshness_policy(source, table, checks),
        )

    def _source_tags(self, source: SourceInfo) -> dict[str, str]:
        memo: tuple[SourceInfo, dict[str, str]] | None = getattr(self, "_tags_memo", None)
        if memo is None or memo[0] is not source:
            memo = (source, self.get_tags(source, TableInfo(name="")))
            self._tags_memo = memo
        return memo[1]

    def _group_of(self, source: SourceInfo) -> str:
        """The group of ``source``, computed once for all its tables (they are translated in a row)."""
        memo: tuple[SourceInfo, str] | None = getattr(self, "_source_memo", None)
        if memo is None or memo[0] is not source:
            memo = (source, self.get_group_name(source))
            self._source_memo = memo
        return memo[1]

    def keys_by_table(self, source: SourceInfo) -> list[dg.AssetKey]:
        """The asset key of every table of ``source``, in table order (the sensor's asset selection)."""
        return [self.get_asset_key(source, table) for table in source.tables]

    # --- models: ``rocky dag`` nodes ------------------------------------------------------------------

    def get_dag_node_asset_key(self, node: DagNode) -> dg.AssetKey:
        """The key of a model: the engine's proposed ``asset_key`` (``[catalog, schema, table]``).

        A replication node is keyed like the discovered table it is (``get_asset_key(source, table)``),
        so a model's dependency on a replicated table lands on the replication asset.
        """
        if node.kind == "replication" and node.source is not None:
            source = SourceInfo(
                id=node.source.schema_, components=node.source.components, source_type=node.source.source_type
            )
            return self.get_asset_key(source, TableInfo(name=node.source.table))
        if node.asset_key:
            return dg.AssetKey(node.asset_key)
        if node.target is not None:
            return dg.AssetKey([node.target.catalog, node.target.schema_, node.target.table])
        return dg.AssetKey([safe_name(node.id)])

    def get_dag_group_name(self, node: DagNode) -> str:
        """The target schema of a model (its layer: staging, marts ...), else its pipeline."""
        if node.target is not None and node.target.schema_:
            return safe_name(node.target.schema_)
        return safe_name(node.pipeline or "rocky")

    def get_dag_node_description(self, node: DagNode) -> str | None:
        """The sidecar's description, else the SQL file's leading comment (the engine picks), else a line
        naming the model."""
        if node.description:
            return node.description
        where = f" ({node.sql_path})" if node.sql_path else ""
        return f"Rocky model {node.label}{where}"

    def get_dag_node_tags(self, node: DagNode) -> dict[str, str]:
        """The sidecar's tags (sanitized: usable in ``tag:key=value`` selections) plus ``rocky/model``,
        ``rocky/pipeline`` and ``rocky/strategy``. Rocky's own keys contain a ``/``, so a sidecar tag
        never overwrites them."""
        tags = {safe_tag_key(k): safe_tag_value(v) for k, v in node.tags.items()}
        tags["rocky/model"] = safe_tag_value(node.label)
        if node.pipeline:
            tags["rocky/pipeline"] = safe_tag_value(node.pipeline)
        if node.strategy is not None:
            tags["rocky/strategy"] = safe_tag_value(node.strategy.type)
        return tags

    def get_dag_node_metadata(self, node: DagNode) -> dict[str, Any]:
        meta: dict[str, Any] = {"rocky/model": node.label}
        if node.pipeline:
            meta["rocky/pipeline"] = node.pipeline
        if node.target is not None:
            name = f"{node.target.catalog}.{node.target.schema_}.{node.target.table}"
            meta["rocky/target_table"] = name
            meta["dagster/table_name"] = name
        if node.strategy is not None:
            meta["rocky/strategy"] = node.strategy.type
        if node.sql_path:
            meta["rocky/sql_path"] = node.sql_path
        return meta

    def get_dag_node_owners(self, node: DagNode) -> list[str]:
        """The sidecar's owners: e-mail addresses as they are, anything else as ``team:<name>`` (the two
        forms Dagster accepts)."""
        owners: list[str] = []
        for owner in node.owners:
            if "@" in owner or owner.startswith("team:"):
                owners.append(owner)
            elif cleaned := _OWNER_TEAM_BAD.sub("_", owner).strip("_"):
                owners.append(f"team:{cleaned}")
        return owners

    def get_dag_node_freshness_policy(self, node: DagNode) -> dg.FreshnessPolicy | None:
        """A time-window policy from the sidecar's ``freshness.max_lag_seconds``."""
        if node.freshness is None or not node.freshness.max_lag_seconds:
            return None
        return _time_window_policy(node.freshness.max_lag_seconds)

    def get_dag_node_automation_condition(self, node: DagNode) -> dg.AutomationCondition[Any] | None:
        """None by default (materialized when asked); override to make models eager or cron-driven."""
        return None

    def get_dag_node_kinds(self, node: DagNode) -> set[str]:
        """``rocky`` and the warehouse the model writes to."""
        return {"rocky", node.warehouse} if node.warehouse else {"rocky"}

    def get_dag_node_spec(self, node: DagNode, deps: Sequence[dg.AssetKey]) -> dg.AssetSpec:
        """The whole spec of a model; ``deps`` are the translated keys of the nodes it reads."""
        return dg.AssetSpec(
            key=self.get_dag_node_asset_key(node),
            deps=list(deps),
            description=self.get_dag_node_description(node),
            metadata=self.get_dag_node_metadata(node),
            group_name=self.get_dag_group_name(node),
            tags=self.get_dag_node_tags(node),
            owners=self.get_dag_node_owners(node),
            kinds=self.get_dag_node_kinds(node),
            code_version=node.sql_hash,
            freshness_policy=self.get_dag_node_freshness_policy(node),
            automation_condition=self.get_dag_node_automation_condition(node),
            skippable=True,
        )
