"""``rocky validate``: load rocky.toml and the models and report every problem without touching data.

Light at import time (argparse only): validate must not import duckdb, pyarrow, httpx or starlette.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.output import Result


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    subparsers.add_parser(
        "validate",
        parents=[common],
        help="check rocky.toml, schedules and models without running anything",
        description="Load rocky.toml and every transformation model, cross-check adapters, schedules "
        "(cron, timezone, after), hooks and connectors, and report each problem with a code (V001...). "
        "Exit 1 when any error is found; warnings alone exit 0. Needs no warehouse connection.",
    )


def execute(args: argparse.Namespace) -> Result:
    import os
    from pathlib import Path

    from rocky_engine.ops.validate import run_validation

    return run_validation(Path(args.config), env=os.environ)
