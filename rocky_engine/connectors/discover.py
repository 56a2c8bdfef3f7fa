"""Connector targets as ``rocky discover`` sources, so the Dagster source sensor can react to loads.

Each ``[connector.NAME]`` is one source: ``id = "connector:NAME"``, ``source_type = "connector"``,
``components = {"connector": NAME}`` (its asset key is ``["connector", NAME, <table>]``), one table (the
target's), and ``last_sync_at`` = the time of its last state commit (``null`` before the first one). A
load that commits no new state (a failure, a skip) does not move ``last_sync_at``, so the sensor only
fires for batches that landed. Reading the state is read-only: discover never takes the writer lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.state.connectors import ConnectorStateRepo
from rocky_engine.wire.discover import SourceInfo, TableInfo

if TYPE_CHECKING:
    from rocky_engine.project import Project
    from rocky_engine.state.store import StateStore

SOURCE_TYPE = "connector"


def connector_sources(project: Project, store: StateStore) -> list[SourceInfo]:
    """One ``sources[]`` entry (CONTRACT section 4) per connector of ``project``, in config order."""
    saved = {s.name: s for s in ConnectorStateRepo(store).all()}
    out: list[SourceInfo] = []
    for name, cfg in project.config.connectors.items():
        state = saved.get(name)
        target = cfg.target
        out.append(SourceInfo(
            id=f"{SOURCE_TYPE}:{name}",
            components={"connector": name},
            source_type=SOURCE_TYPE,
            last_sync_at=state.committed_at if state is not None else None,
            tables=[TableInfo(name=target.table)],
            metadata={
                "target": target.full_name,
                "adapter": target.adapter,
                "commit_seq": state.commit_seq if state is not None else 0,
            },
        ))
    return out


def discover_connector_sources(project: Project) -> list[SourceInfo]:
    """:func:`connector_sources` with the project's state store opened read-only (none: no connectors)."""
    if not project.config.connectors:
        return []
    from rocky_engine.state.store import StateStore

    with StateStore.open(project.state_path(reading=True), writer=False, on_newer="recreate") as store:
        return connector_sources(project, store)
