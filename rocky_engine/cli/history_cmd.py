"""``rocky history [--model NAME] [--since DATE] [--audit]``: past runs from the state store."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.output import Result


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = subparsers.add_parser(
        "history",
        parents=[common],
        help="list past runs recorded in the state store",
        description="List the newest 50 runs (or one model's executions) recorded in the state store. "
        "Reads only the state file: no warehouse round-trip, no writer lock.",
    )
    parser.add_argument("--model", metavar="NAME", help="list this model's executions instead of runs")
    parser.add_argument(
        "--since", metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD in UTC, or RFC 3339)"
    )
    parser.add_argument(
        "--audit", action="store_true",
        help="add the audit trail: hostname, triggering identity, config hash, idempotency key, exit code",
    )


def execute(args: argparse.Namespace) -> Result:
    from pathlib import Path

    from rocky_engine.ops.history import build_history, parse_since
    from rocky_engine.project import project_state_file
    from rocky_engine.state.store import StateStore

    since = parse_since(args.since) if args.since is not None else None
    path = project_state_file(Path(args.config), state_path=args.state_path, namespace=args.state_namespace)
    with StateStore.open(path, writer=False) as store:
        return build_history(store, model=args.model, since=since, audit=args.audit)
