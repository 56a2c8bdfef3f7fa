"""``RockyComponent``: a Rocky project as a Dagster component (``type: dagster_rocky.RockyComponent``).

```yaml
type: dagster_rocky.RockyComponent
attributes:
  config_path: rocky.toml          # relative to this defs.yaml
  enable_sensor: true
  sensor_granularity: per_group
  tenant: tenant                   # collapse the tenant component into dynamic partitions
  translator_class: my_project.translation.MyTranslator   # a RockyDagsterTranslator subclass
  translation:
    group_name: "rocky_{{ source.source_type }}"
```

Replicated tables (``rocky discover``) and transformation models (``rocky dag``) both become assets:
one multi-asset per source group, one per transformation pipeline, one multi-asset check per quality
pipeline, all in the concurrency pool ``pool`` (default ``rocky``).

The discover and dag documents are component state: ``dg utils refresh-defs-state`` (or ``dagster dev``)
runs ``rocky discover`` and ``rocky dag`` once and caches both, so loading the code location does not call
the engine. With no cached state yet, the first load runs them live and caches the result on the local
filesystem.
"""

# No `from __future__ import annotations` here, deliberately: Dagster's Resolvable reads the dataclass
# annotations at runtime to derive the YAML schema, and string annotations defeat it.

import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import dagster as dg
from dagster.components import (
    DefsStateConfig,
    DefsStateConfigArgs,
    ResolvedDefsStateConfig,
    StateBackedComponent,
)
from dagster.components.utils.translation import TranslationFn, TranslationFnResolver
from dagster_shared.serdes.objects.models.defs_state_info import DefsStateManagementType

from dagster_rocky.assets import DEFAULT_POOL, build_rocky_assets
from dagster_rocky.models import build_rocky_model_assets
from dagster_rocky.resource import RockyResource
from dagster_rocky.sensor import rocky_source_sensor
from dagster_rocky.tenancy import default_partitions_name
from dagster_rocky.translator import RockyDagsterTranslator, safe_name
from dagster_rocky.types import DagNode, DagResult, DiscoverChecks, DiscoverResult, SourceInfo, TableInfo


@dataclass(frozen=True)
class RockyTableData:
    """What a ``translation`` template sees: ``{{ source }}`` and ``{{ table }}`` (plus ``{{ spec }}``)."""

    source: SourceInfo
    table: TableInfo


class TranslatedRockyTranslator(RockyDagsterTranslator):
    """Applies a component ``translation`` on top of the default specs; keys follow the translated spec."""

    def __init__(
        self, translation: TranslationFn[RockyTableData], base: RockyDagsterTranslator | None = None
    ):
        self._translation = translation
        self._base = base or RockyDagsterTranslator()
        self._cache: dict[tuple[str, str, tuple[str, ...]], dg.AssetSpec] = {}

    def get_asset_spec(
        self,
        source: SourceInfo,
        table: TableInfo,
        checks: DiscoverChecks | None = None,
        extra_tags: Any = None,
    ) -> dg.AssetSpec:
        cache_key = (source.id, table.name, tuple(source.components))
        spec = self._cache.get(cache_key)
        if spec is None:
            base = self._base.get_asset_spec(source, table, checks, extra_tags)
            spec = self._translation(base, RockyTableData(source=source, table=table))
            self._cache[cache_key] = spec
        return spec

    def get_asset_key(self, source: SourceInfo, table: TableInfo) -> dg.AssetKey:
        return self.get_asset_spec(source, table).key

    def get_group_name(self, source: SourceInfo) -> str:
        if source.tables:
            group = self.get_asset_spec(source, source.tables[0]).group_name
            if group:
                return group
        return self._base.get_group_name(source)

    # A model is translated by the base translator (the ``translation`` templates see tables only); a
    # replicated table read by a model keeps the translated key its replication asset has.
    def get_dag_node_asset_key(self, node: DagNode) -> dg.AssetKey:
        if node.kind == "replication":
            return super().get_dag_node_asset_key(node)
        return self._base.get_dag_node_asset_key(node)

    def get_dag_node_spec(self, node: DagNode, deps: Sequence[dg.AssetKey]) -> dg.AssetSpec:
        return self._base.get_dag_node_spec(node, deps)


def _translation_vars(data: RockyTableData) -> dict[str, Any]:
    return {"source": data.source, "table": data.table}


@dataclass
class RockyComponent(StateBackedComponent, dg.Resolvable):
    """A Rocky replication project: one subset-aware multi-asset per group, checks, an optional sensor."""

    config_path: str = "rocky.toml"
    binary_path: str = "rocky"
    models_dir: str = "models"
    state_path: str | None = None
    #: per-namespace state store (``--state-namespace``); wins over state_path
    state_namespace: str | None = None
    pipeline: str | None = None
    timeout_seconds: int = 3600
    #: ``rocky run --wait-for-lock``: seconds a step waits for another step's state-store lock
    wait_for_lock_seconds: int | None = 600
    #: build the transformation models (``rocky dag``) as assets too
    models: bool = True
    #: the Dagster concurrency pool of every step; null: none
    pool: str | None = DEFAULT_POOL
    #: dotted path of a RockyDagsterTranslator subclass (``my_project.translation.MyTranslator``)
    translator_class: str | None = None
    enable_sensor: bool = False
    sensor_granularity: Literal["per_source", "per_group"] = "per_source"
    sensor_interval_seconds: int = 300
    tenant: str | None = None
    op_tags: dict[str, Any] | None = None
    resource_key: str = "rocky"
    #: prefix of the multi-asset and sensor names; default: derived from config_path
    name: str | None = None
    translation: (
        Annotated[
            TranslationFn[RockyTableData],
            TranslationFnResolver(template_vars_for_translation_fn=_translation_vars),
        ]
        | None
    ) = None
    defs_state: ResolvedDefsStateConfig = field(default_factory=DefsStateConfigArgs.local_filesystem)

    # Set by load(): where defs.yaml lives, so relative paths resolve against it rather than the cwd.
    # Not a dataclass field (Resolvable would expose it in the YAML schema), hence no runtime annotation.
    if TYPE_CHECKING:
        _base_dir: Path | None = None
    else:
        _base_dir = None

    def __post_init__(self) -> None:
        # The YAML schema accepts any string (values may be templates), so the real check happens here.
        if self.sensor_granularity not in ("per_source", "per_group"):
            raise ValueError(
                f"RockyComponent: sensor_granularity must be per_source or per_group "
                f"(got {self.sensor_granularity!r})"
            )
        if self.sensor_interval_seconds < 1 or self.timeout_seconds < 1:
            raise ValueError("RockyComponent: sensor_interval_seconds and timeout_seconds must be positive")
        if self.translator_class is not None and "." not in self.translator_class:
            raise ValueError(
                "RockyComponent: translator_class must be a dotted path such as "
                f"'my_project.translation.MyTranslator' (got {self.translator_class!r})"
            )

    @classmethod
    def load(cls, attributes: Any, context: dg.ComponentLoadContext) -> "RockyComponent":
        component = super().load(attributes, context)
        component._base_dir = Path(context.path)
        return component

    # --- naming ---------------------------------------------------------------------------------------

    @property
    def slug(self) -> str:
        """The name prefix: ``name``, else the config file's directory and stem (``config/rocky.toml`` ->
        ``config_rocky``, ``rocky.toml`` -> ``rocky``), so names stay valid and stable wherever it lives."""
        if self.name:
            return safe_name(self.name)
        path = Path(self.config_path)
        parts = [p for p in (path.parent.name, path.stem) if p and p not in (".", "..")]
        return safe_name("_".join(parts) or "rocky")

    @property
    def sensor_name(self) -> str:
        return f"{self.slug}_source_sensor"

    @property
    def defs_state_config(self) -> DefsStateConfig:
        suffix = f":{self.pipeline}" if self.pipeline else ""
        return DefsStateConfig.from_args(
            self.defs_state, default_key=f"RockyComponent[{self.config_path}{suffix}]"
        )

    # --- the engine -----------------------------------------------------------------------------------

    def _resolve(self, path: str | None) -> str | None:
        if path is None:
            return None
        p = Path(path).expanduser()
        if p.is_absolute() or self._base_dir is None:
            return str(p)
        return str((self._base_dir / p).resolve())

    def build_resource(self) -> RockyResource:
        binary = self.binary_path
        if "/" in binary:
            binary = self._resolve(binary) or binary
        return RockyResource(
            binary_path=binary,
            config_path=self._resolve(self.config_path) or self.config_path,
            state_path=self._resolve(self.state_path),
            state_namespace=self.state_namespace,
            models_dir=self.models_dir,
            timeout_seconds=self.timeout_seconds,
            wait_for_lock_seconds=self.wait_for_lock_seconds,
        )

    def build_translator(self) -> RockyDagsterTranslator:
        base = self._translator_from_class()
        if self.translation is None:
            return base
        return TranslatedRockyTranslator(self.translation, base)

    def _translator_from_class(self) -> RockyDagsterTranslator:
        """An instance of ``translator_class`` (imported now), else the default translator."""
        if self.translator_class is None:
            return RockyDagsterTranslator()
        module_name, _, class_name = self.translator_class.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(
                f"RockyComponent: translator_class {self.translator_class!r} cannot be imported ({exc})"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, RockyDagsterTranslator)):
            raise ValueError(
                f"RockyComponent: translator_class {self.translator_class!r} is not a "
                "RockyDagsterTranslator subclass"
            )
        return cls()

    def _fetch_state(self) -> "RockyState":
        rocky = self.build_resource()
        return RockyState(discover=rocky.discover(self.pipeline), dag=rocky.dag() if self.models else None)

    def write_state_to_path(self, state_path: Path) -> None:
        """Run ``rocky discover`` (and ``rocky dag``) and cache the documents as this component's state."""
        state = self._fetch_state()
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(state.dump())

    def build_defs_from_state(
        self, context: dg.ComponentLoadContext, state_path: Path | None
    ) -> dg.Definitions:
        if self._base_dir is None:
            self._base_dir = Path(context.path)
        state = self._load_state(context, state_path)
        return self.build_defs_from_discover(state.discover, dag=state.dag)

    def _load_state(self, context: dg.ComponentLoadContext, state_path: Path | None) -> "RockyState":
        if state_path is not None and state_path.exists():
            state = RockyState.load(state_path.read_text())
            if state.dag is not None or not self.models:
                return state
        state = self._fetch_state()
        self._cache_locally(context, state)
        return state

    def _cache_locally(self, context: dg.ComponentLoadContext, state: "RockyState") -> None:
        """Keep a live fetch so the next load reads it (only for local-filesystem state)."""
        if self.defs_state_config.management_type != DefsStateManagementType.LOCAL_FILESYSTEM:
            return
        try:
            from dagster.components.utils.project_paths import get_local_state_path

            path = get_local_state_path(self.defs_state_config.key, Path(context.project_root))
            path.write_text(state.dump())
        except Exception:  # no dg project around this component: nothing to cache into, that is fine
            return

    def build_defs_from_discover(
        self, discover: DiscoverResult, dag: DagResult | None = None
    ) -> dg.Definitions:
        """Assets, checks, the optional sensor and the resource from the discover (and dag) documents."""
        translator = self.build_translator()
        partitions_def = (
            dg.DynamicPartitionsDefinition(name=default_partitions_name(self.tenant)) if self.tenant else None
        )
        assets = build_rocky_assets(
            discover,
            translator=translator,
            resource_key=self.resource_key,
            pipeline=self.pipeline,
            op_tags=self.op_tags,
            tenant_component=self.tenant,
            partitions_def=partitions_def,
            name_prefix=self.slug,
            dag=dag,
            pool=self.pool,
        )
        model_assets = (
            build_rocky_model_assets(
                dag,
                translator=translator,
                resource_key=self.resource_key,
                op_tags=self.op_tags,
                name_prefix=self.slug,
                pool=self.pool,
            )
            if dag is not None and self.models
            else []
        )
        sensors: list[dg.SensorDefinition] = []
        if self.enable_sensor and assets:
            sensors.append(
                rocky_source_sensor(
                    rocky_resource=self.resource_key,
                    target=assets,
                    granularity=self.sensor_granularity,
                    translator=translator,
                    name=self.sensor_name,
                    minimum_interval_seconds=self.sensor_interval_seconds,
                    tenant_component=self.tenant,
                    tenant_partitions_name=partitions_def.name if partitions_def is not None else None,
                    pipeline=self.pipeline,
                )
            )
        return dg.Definitions(
            assets=[*assets, *(a for a in model_assets if not isinstance(a, dg.AssetChecksDefinition))],
            asset_checks=[a for a in model_assets if isinstance(a, dg.AssetChecksDefinition)],
            sensors=sensors,
            resources={self.resource_key: self.build_resource()},
        )


@dataclass(frozen=True)
class RockyState:
    """The component's cached state: the discover document and the dag document (None: not fetched)."""

    discover: DiscoverResult
    dag: DagResult | None = None

    def dump(self) -> str:
        return json.dumps(
            {
                "discover": self.discover.model_dump(mode="json", by_alias=True),
                "dag": None if self.dag is None else self.dag.model_dump(mode="json", by_alias=True),
            }
        )

    @classmethod
    def load(cls, text: str) -> "RockyState":
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("command") == "discover":
            return cls(discover=DiscoverResult.model_validate(doc))  # state cached by an older version
        dag = doc.get("dag")
        return cls(
            discover=DiscoverResult.model_validate(doc["discover"]),
            dag=None if dag is None else DagResult.model_validate(dag),
        )
