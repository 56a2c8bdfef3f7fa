"""V021 of ``rocky validate``: a merge that asks to be atomic, on an adapter whose declared level lacks MERGE.

``rocky validate`` never connects, so the level is the one the config declares
(``AdapterPlugin.declared_dialect``: Spark's ``table_format``, Parquet when undeclared); ``rocky run``
refuses the same request at the level the server answers. The wording is ``config.atomic_merges``'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from rocky_engine.config.adapters import WAREHOUSE_TYPES, SparkAdapterConfig
from rocky_engine.config.atomic_merges import AtomicMergeRequest, refusal, replication_request
from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import ReplicationPipeline, TransformationPipeline
from rocky_engine.config.validation import error_message
from rocky_engine.wire.validate import ValidationMessage

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect
    from rocky_engine.models.dag import ModelSet


def atomic_merge_messages(
    cfg: RockyConfig, model_sets: Mapping[str, ModelSet]
) -> Iterator[ValidationMessage]:
    """V021 for every atomic merge request the declared level of its target cannot honour.

    Args:
        model_sets: the loaded models by ``models`` glob (a glob whose models do not load is skipped: its
            V003-V005/V013 is reported already).
    """
    for name, p in cfg.pipelines.items():
        if isinstance(p, ReplicationPipeline):
            request = replication_request(name, p)
            if request is not None:
                yield from _refused(cfg, request, p.target.adapter)
        elif isinstance(p, TransformationPipeline) and p.models in model_sets:
            for model in model_sets[p.models].models.values():
                request = model.strategy.atomic_request(name, model.name, p.atomic_merges)
                if request is not None:
                    yield from _refused(cfg, request, p.target.adapter)


def _refused(cfg: RockyConfig, request: AtomicMergeRequest, adapter: str) -> Iterator[ValidationMessage]:
    dialect = _declared(cfg, adapter)
    if dialect is None or dialect.capabilities.merge:
        return
    yield error_message("V021", str(refusal(request, adapter, dialect.level_name, probed=False,
                                            note=_how_declared(cfg, adapter))), request.field)


def _declared(cfg: RockyConfig, adapter: str) -> Dialect | None:
    """The declared dialect of a warehouse adapter; None when the name is not one (V002/V014 say so)."""
    config = cfg.adapters.get(adapter)
    if config is None or config.type not in WAREHOUSE_TYPES:
        return None
    from rocky_engine.adapters.registry import dialect_of  # the plugin only: no driver, no pyspark

    return dialect_of(cfg, adapter)


def _how_declared(cfg: RockyConfig, adapter: str) -> str:
    config = cfg.adapters[adapter]
    if isinstance(config, SparkAdapterConfig) and config.table_format is None:
        return ": table_format is not declared, so Parquet is assumed"
    return ""
