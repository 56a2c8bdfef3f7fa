"""``rocky tick``: evaluate all standing schedule demand once and run what is due (CONTRACT section 6)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    from rocky_engine.schedule.clock import FUTURE_SKEW_SECONDS

    p = sub.add_parser(
        "tick",
        parents=[common],
        help="evaluate schedules once and run what is due (point a one-minute timer at this)",
        description="One reconciler pass: evaluate every [pipeline.*.schedule] (cron, after, freshness) and "
        "queued webhook demands, and run what is due, one child `rocky run` at a time. Exit 0 nothing due "
        "or all succeeded, 2 a launched run failed or was partial, 1 the tick could not run (config, "
        "state, unreadable webhook spool, a --now later than the wall clock without --dry-run).",
    )
    p.add_argument("--dry-run", action="store_true", help="report what would run; no lock, writes or runs")
    p.add_argument(
        "--now",
        metavar="RFC3339",
        help="evaluate at this instant (e.g. 2026-05-02T03:00:00Z). A real tick refuses an instant more than "
        f"{FUTURE_SKEW_SECONDS:.0f} s later than the wall clock (exit 1): it would store future cron "
        "anchors and backoffs, and cron would not fire until then; preview the future with --dry-run",
    )
    p.add_argument("--pipeline", metavar="NAME", help="evaluate only this pipeline")


def parse_now(text: str) -> datetime:
    """An RFC 3339 instant with an offset or ``Z``; a naive time is refused (it would be ambiguous)."""
    from datetime import datetime

    from rocky_engine.errors import UsageError
    from rocky_engine.state._time import utc

    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--now '{text}' is not an RFC 3339 timestamp", hint="write it like 2026-05-02T03:00:00Z"
        ) from None
    if value.tzinfo is None:
        raise UsageError(
            f"--now '{text}' has no UTC offset", hint="append Z or an offset: 2026-05-02T03:00:00Z"
        )
    return utc(value)


def execute(args: argparse.Namespace) -> Any:
    import signal

    from rocky_engine.project import load_project
    from rocky_engine.schedule.reconciler import Reconciler
    from rocky_engine.schedule.spawner import SubprocessSpawner
    from rocky_engine.state._time import now_utc

    pinned = parse_now(args.now) if args.now else None
    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    spawner = SubprocessSpawner()
    reconciler = Reconciler(spawner=spawner, clock=(lambda: pinned) if pinned else now_utc)

    def stop(signum: int, _frame: object) -> None:
        # A stopping tick starts nothing new and drains its child: SIGTERM now, SIGKILL 60 s later.
        reconciler.request_stop()
        spawner.terminate(drained=True)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return reconciler.tick(project, dry_run=args.dry_run, pipeline=args.pipeline)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
