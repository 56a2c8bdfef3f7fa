"""``RockyDagsterTranslator``: how a discovered source table becomes a Dagster asset.

Subclass it and override any ``get_*`` method to change keys, groups, tags or metadata; pass the same
instance to ``load_rocky_assets``, the asset factory and ``rocky_source_sensor`` so the keys agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

from dagster_rocky.types import DiscoverChecks, SourceInfo, TableInfo

_NAME_BAD = re.compile(r"[^A-Za-z0-9_]")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")


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
        """The first string component (the tenant, by convention), else the source type."""
        for value in source.components.values():
            if isinstance(value, str) and value:
                return safe_name(value)
        return safe_name(source.source_type)

    def get_tags(self, source: SourceInfo) -> dict[str, str]:
        """``rocky/source_type`` and one ``rocky/<component>`` tag per component."""
        tags = {"rocky/source_type": safe_tag_value(source.source_type)}
        for name, value in source.components.items():
            tags[f"rocky/{safe_tag_key(name)}"] = safe_tag_value(component_value(value))
        return tags

    def get_metadata(self, source: SourceInfo, table: TableInfo) -> dict[str, Any]:
        """Where the table comes from: source id and type, components, last sync, row count."""
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
        group, tags = self._per_source(source)
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

    def _per_source(self, source: SourceInfo) -> tuple[str, dict[str, str]]:
        """Group and tags of ``source``, computed once for all its tables (they are translated in a row)."""
        memo: tuple[SourceInfo, str, dict[str, str]] | None = getattr(self, "_source_memo", None)
        if memo is None or memo[0] is not source:
            memo = (source, self.get_group_name(source), self.get_tags(source))
            self._source_memo = memo
        return memo[1], memo[2]

    def keys_by_table(self, source: SourceInfo) -> list[dg.AssetKey]:
        """The asset key of every table of ``source``, in table order (the sensor's asset selection)."""
        return [self.get_asset_key(source, table) for table in source.tables]
