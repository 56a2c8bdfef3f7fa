"""``rocky ci``: validate, compile and build every model against an empty scratch DuckDB, run the
assertions; never writes to the real warehouse."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.output import Result


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "ci",
        parents=[common],
        help="validate + compile + build every model on an empty scratch DuckDB + assertions (no writes)",
        description="Validate rocky.toml, compile every transformation model, build each one with zero rows "
        "in a scratch in-memory DuckDB (the real DuckDB warehouse, when its file exists, is attached "
        "READ_ONLY so source tables resolve), and run the pipelines' assertions against those empty "
        "tables. Never writes to the real warehouse. The JSON `exit_code` is 0, 4 when everything passed "
        "with advisory warnings (the process still exits 0), or 1 on errors (the process exits 1).",
    )
    parser.add_argument("--pipeline", help="check only this transformation pipeline")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="set {{ var('NAME') }} in model SQL (repeatable)")
    parser.add_argument("--models", metavar="DIR",
                        help="read the transformation pipeline's models from DIR (relative to the working "
                        "directory) instead of its `models` glob")


def execute(args: argparse.Namespace) -> Result:
    from pathlib import Path

    from rocky_engine.cli.run_cmd import _parse_vars
    from rocky_engine.ops.ci import run_ci

    return run_ci(Path(args.config), pipeline=args.pipeline, variables=_parse_vars(args.var),
                  models_dir=args.models)
