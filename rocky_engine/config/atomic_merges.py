"""Atomic merges: the user's request that a merge be one MERGE statement, never a whole-table rewrite.

Who asks: a transformation pipeline for every merge model (``atomic_merges = true``), a model for itself
(``[strategy] atomic``, which wins over the pipeline's either way), a replication pipeline with
``strategy = "merge"`` (``atomic_merges = true``). A warehouse whose capability level has no MERGE (Spark's
built-in Parquet tables) does a merge as a rewrite through a stage table and two renames; with the request
it refuses the merge instead. ``rocky validate`` refuses at the level the adapter declares (V021),
``rocky run`` at the level the server answers, before anything is written. This module words the request
and the refusal, so that both say the same thing; the callers decide when a level has no MERGE.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocky_engine.config.pipelines import ReplicationPipeline
from rocky_engine.errors import CapabilityRefused


@dataclass(frozen=True, slots=True)
class AtomicMergeRequest:
    """One request for atomic merges, as the refusal names it."""

    #: what asks, in words: ``model 'orders' of pipeline 'models'``
    subject: str
    #: the key that asks, as the user wrote it
    key: str
    #: the key path ``rocky validate`` reports (``ValidationMessage.field``)
    field: str


def model_request(pipeline: str, model: str, *, own: bool) -> AtomicMergeRequest:
    """A merge model's request; ``own``: its ``[strategy] atomic``, else its pipeline's ``atomic_merges``.

    The field is the pipeline's ``models`` key for a model's own request, as for every finding about the
    model files (V013): rocky.toml has no key path into a sidecar.
    """
    subject = f"model '{model}' of pipeline '{pipeline}'"
    if own:
        return AtomicMergeRequest(subject, "[strategy] atomic = true", f"pipeline.{pipeline}.models")
    return AtomicMergeRequest(subject, f"atomic_merges = true under [pipeline.{pipeline}]",
                              f"pipeline.{pipeline}.atomic_merges")


def replication_request(name: str, pipeline: ReplicationPipeline) -> AtomicMergeRequest | None:
    """The request of a replication pipeline (None: it does not ask)."""
    if pipeline.strategy != "merge" or not pipeline.atomic_merges:
        return None
    return AtomicMergeRequest(f"replication pipeline '{name}'", "atomic_merges = true",
                              f"pipeline.{name}.atomic_merges")


def refusal(request: AtomicMergeRequest, adapter: str, level: str, *, probed: bool,
            note: str = "") -> CapabilityRefused:
    """The refusal of ``request`` on ``adapter``, whose capability level (``level``: the dialect's
    ``level_name``) has no MERGE.

    Args:
        probed: the level is the server's answer (``rocky run``), not the one the config declares
            (``rocky validate``): then declaring another ``table_format`` would not help.
        note: how the declared level was found, appended to ``level`` (``table_format`` not declared).
    """
    source = "its server answers" if probed else "it declares"
    message = (
        f"{request.subject} asks for an atomic merge ({request.key}), but adapter '{adapter}' has no MERGE "
        f"at the capability level {source} ({level}{note}): the merge would rewrite the whole table "
        "through a stage and two renames"
    )
    if probed:
        fix = "point the adapter at a server whose tables are Delta or Iceberg"
    else:
        fix = f"declare table_format = \"delta\" under [adapter.{adapter}] if the server's tables are Delta"
    return CapabilityRefused(
        message,
        hint=f"{fix}, or remove the atomic request and accept the rewrite, or use another strategy "
        "(delete_insert, full_refresh)",
    )
