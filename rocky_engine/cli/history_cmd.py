"""``rocky history [--model NAME] [--since DATE] [--status S] [--trigger T] [--pipeline P] [--audit]``:
past runs from the state store."""

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
        "Reads only the state file: no warehouse round-trip, no writer lock. --status, --trigger and "
        "--pipeline narrow the runs before the 50 are taken, so the newest 50 scheduled runs show even "
        "when manual runs are far more frequent. On a terminal, failed, partial and interrupted runs are "
        "highlighted; --output md prints a list ready to paste into Slack.",
    )
    parser.add_argument("--model", metavar="NAME", help="list this model's executions instead of runs")
    parser.add_argument(
        "--since", metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD in UTC, or RFC 3339)"
    )
    parser.add_argument(
        "--status", action="append", default=[], metavar="STATUS",
        help="only runs that ended with STATUS: Success, PartialFailure or Failure (repeat it or separate "
        "values with commas: --status Failure,PartialFailure)",
    )
    parser.add_argument(
        "--trigger", action="append", default=[], metavar="TRIGGER",
        help="only runs started by TRIGGER: Manual, Schedule, Webhook, Sensor or Ci (or one that "
        "ROCKY_RUN_TRIGGER recorded); repeatable, comma-separated",
    )
    parser.add_argument("--pipeline", metavar="NAME", help="only the runs of pipeline NAME")
    parser.add_argument(
        "--audit", action="store_true",
        help="add the audit trail: hostname, triggering identity, config hash, idempotency key, exit code",
    )


def execute(args: argparse.Namespace) -> Result:
    from pathlib import Path

    from rocky_engine.ops.history import build_history, parse_filters, parse_since
    from rocky_engine.project import config_if_it_loads, locate_state_file
    from rocky_engine.state.store import StateStore

    since = parse_since(args.since) if args.since is not None else None
    config_path = Path(args.config)
    config = config_if_it_loads(config_path)
    path = locate_state_file(
        config_path.absolute().parent, config, state_path=args.state_path, namespace=args.state_namespace,
        reading=True,
    )
    with StateStore.open(path, writer=False) as store:
        filters = parse_filters(
            store, statuses=args.status, triggers=args.trigger, pipeline=args.pipeline,
            configured=config.pipelines if config is not None else (),
        )
        return build_history(store, model=args.model, since=since, audit=args.audit, filters=filters)
