"""``rocky dag``: the project's model DAG (models and replicated tables) without a warehouse connection."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "dag",
        parents=[common],
        help="print the model DAG (no warehouse connection)",
        description="Print every transformation model and every table a replication pipeline writes, "
        "with their dependencies, targets, strategies, checks and sidecar metadata, read from the project "
        "files alone. JSON for orchestrators (dagster_rocky builds one asset per node from it), a table "
        "for people.",
    )
    p.add_argument("--pipeline", help="only the nodes of this transformation or replication pipeline")


def execute(args: argparse.Namespace) -> Any:
    from rocky_engine.ops.dag import build_dag
    from rocky_engine.project import load_project

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    return build_dag(project, args.pipeline)
