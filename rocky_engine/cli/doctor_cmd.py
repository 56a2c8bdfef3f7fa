"""``rocky doctor [--check NAME]``: health checks; exit 3 when any check is Critical."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.output import Result

CHECKS = ("config", "state", "state_schema", "adapters", "pipelines", "auth", "scheduler", "state_rw",
          "state_concurrency")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="health checks: config, state, adapters, pipelines, auth, scheduler",
        description="Run the health checks (config, state, state_schema, adapters, pipelines, auth, and "
        "scheduler when a pipeline has a [schedule], state_rw and state_concurrency on a remote [state] "
        "backend). Exit 3 when any check is Critical (a config error, "
        "an unreachable warehouse, rejected credentials, a wedged scheduler); warnings exit 0. Use it as a "
        "pre-flight before `rocky run`.",
    )
    parser.add_argument("--check", metavar="NAME", choices=CHECKS, help=f"run one check: {', '.join(CHECKS)}")
    parser.add_argument("--now", metavar="RFC3339", help=argparse.SUPPRESS)


def execute(args: argparse.Namespace) -> Result:
    from pathlib import Path

    from rocky_engine.ops.doctor import run_doctor

    return run_doctor(
        Path(args.config),
        state_path=args.state_path,
        state_namespace=args.state_namespace,
        only=args.check,
        now=_parse_now(args.now),
    )


def _parse_now(value: str | None) -> Any:
    if value is None:
        return None
    from datetime import UTC, datetime

    from rocky_engine.errors import UsageError

    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--now '{value}' is not an RFC 3339 timestamp", hint="e.g. 2026-05-02T03:00:00Z"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
