"""``rocky discover``: list the source schemas and tables of the replication pipelines."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "discover",
        parents=[common],
        help="list replication sources (schemas and tables)",
        description="List the source schemas matching each replication pipeline's schema_pattern, with "
        "their components and tables. JSON for tools (dagster_rocky builds its assets from it), a table "
        "for people.",
    )
    p.add_argument("--pipeline", help="only this replication pipeline (default: all of them)")


def execute(args: argparse.Namespace) -> Any:
    from rocky_engine.project import load_project
    from rocky_engine.replication.discover import discover

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    result = discover(project.config, args.pipeline)
    if args.pipeline is None:
        # Child connector targets are sources too (source_type "connector"); --pipeline narrows to one
        # replication pipeline, so they are left out then.
        from rocky_engine.connectors.discover import discover_connector_sources

        result.sources.extend(discover_connector_sources(project))
        # Every pipeline's sources: what `rocky dag` lists the replicated tables from, unconnected.
        from rocky_engine.replication.discover import write_cache

        write_cache(project.dot_rocky, result)
    return result
