"""Child connectors (seeds/child-connectors.md): programs Rocky starts, checks and loads from.

- ``manifest``: ``connector.toml`` validation and command resolution;
- ``plan``: every check before a run starts (config, manifest, secrets, target, program);
- ``launch``: the sandboxed start (cleared env, process group, rlimits, watchdogs, redacted log lines);
- ``result``: ``_rocky_result.json`` and the files it lists;
- ``scratch``: per-attempt scratch directories;
- ``promote``: staging, drift, contract, the one INSERT, leftover staging cleanup;
- ``runner``: one whole run (``rocky load --connector NAME``);
- ``discover``: connector targets as ``rocky discover`` sources.

Modules import lazily here: ``rocky --help`` must not pull in duckdb or pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.connectors.connector_run import execute_connector_load
    from rocky_engine.connectors.discover import connector_sources

__all__ = ["connector_sources", "execute_connector_load"]


def __getattr__(name: str) -> Any:
    if name == "execute_connector_load":
        from rocky_engine.connectors.connector_run import execute_connector_load

        return execute_connector_load
    if name == "connector_sources":
        from rocky_engine.connectors.discover import connector_sources

        return connector_sources
    raise AttributeError(name)
