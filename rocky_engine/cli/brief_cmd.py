"""``rocky brief [--since last|24h|7d] [--output md|json]``: a digest of recent runs, drift, freshness,
quality and the scheduler, read from the state store."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.output import Result


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "brief",
        parents=[common],
        help="digest of recent runs, drift, freshness, quality and the scheduler",
        description="Summarise the estate since a moment: runs (partial vs total failures, failed models), "
        "drift, freshness against budgets, quality checks, and the scheduler. `--output md` is Markdown fit "
        "to paste into Slack or mail (pass it explicitly from a hook or cron: piped output defaults to "
        "JSON). `--since last` starts where the previous `--since last` brief ended and advances that "
        "cursor only once the brief was written out. Reads the state store only; no warehouse round-trip.",
    )
    parser.add_argument(
        "--since", default="24h", metavar="WHEN",
        help="last | a span (24h, 7d, 90m) | a date or RFC 3339 time (default 24h)",
    )
    parser.add_argument("--now", metavar="RFC3339", help=argparse.SUPPRESS)


def execute(args: argparse.Namespace) -> Result:
    from rocky_engine.cli.doctor_cmd import _parse_now
    from rocky_engine.ops.brief import build_brief
    from rocky_engine.project import load_project

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    return build_brief(project, since_spec=args.since, now=_parse_now(args.now))
