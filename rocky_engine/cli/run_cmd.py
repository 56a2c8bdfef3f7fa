"""``rocky run``: run one pipeline (replication, transformation, quality, snapshot, load)."""

from __future__ import annotations

import argparse
import os
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "run",
        parents=[common],
        help="run a pipeline",
        description="Run one pipeline: copies/builds every table or model, containing failures per table. "
        "Exit 0 success, 2 partial success, 1 failure, 130 interrupted.",
    )
    p.add_argument("--pipeline", help="pipeline to run (required when several are configured)")
    p.add_argument("--filter", help="replication only: id=<source id>, table=<name> or <component>=<value>")
    p.add_argument("--model", help="transformation only: run just this model")
    p.add_argument("--parallel", type=int, help="models in flight at once (default 4)")
    p.add_argument("--resume", metavar="RUN_ID", help="replication: skip tables RUN_ID finished")
    p.add_argument("--resume-latest", action="store_true", help="replication: resume the latest run")
    p.add_argument(
        "--idempotency-key",
        default=None,
        help="skip the run when this key already succeeded or is in flight (env ROCKY_IDEMPOTENCY_KEY)",
    )
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                   help="set {{ var('NAME') }} in model SQL (repeatable)")


def _parse_vars(pairs: list[str]) -> dict[str, str]:
    from rocky_engine.errors import UsageError

    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--var '{pair}' is not NAME=VALUE", hint="write --var start_date=2026-01-01")
        out[name] = value
    return out


def _load_pipeline(project: Any, args: argparse.Namespace) -> str | None:
    """The pipeline's name when ``rocky run`` was asked to run a load pipeline (it prints the load
    document and writes no run record, CONTRACT section 3); None for every other type."""
    from rocky_engine.errors import UsageError
    from rocky_engine.run.runner import choose_pipeline

    name = choose_pipeline(project, args.pipeline, resume=args.resume, resume_latest=args.resume_latest)
    if project.config.pipeline(name).type != "load":
        return None
    refused = [flag for flag, value in (
        ("--resume", args.resume), ("--resume-latest", args.resume_latest),
        ("--idempotency-key", args.idempotency_key), ("--model", args.model), ("--filter", args.filter),
    ) if value]
    if refused:
        raise UsageError(f"{', '.join(refused)} cannot be used with load pipeline '{name}'",
                         hint=f"run it as `rocky run --pipeline {name}` (or `rocky load --pipeline {name}`)")
    return name


def _log_config_warnings(warnings: list[str]) -> None:
    """Say on stderr what loading ignored (an unknown key in a lenient table, a top-level typo).

    Hook warnings are left to the run's event sink, which logs them as it wires the hooks.
    """
    from rocky_engine.logs import get_logger

    log = get_logger("config")
    for warning in warnings:
        if "[hook" not in warning:
            log.warning(warning)


def execute(args: argparse.Namespace) -> Any:
    from rocky_engine.errors import UsageError
    from rocky_engine.project import load_project
    from rocky_engine.run.options import RunOptions
    from rocky_engine.run.runner import execute_run
    from rocky_engine.state.runs import trigger_from_env

    key = args.idempotency_key or os.environ.get("ROCKY_IDEMPOTENCY_KEY") or None
    if key and (args.resume or args.resume_latest):
        raise UsageError(
            "--idempotency-key cannot be combined with --resume/--resume-latest",
            hint="drop one of them: a resume is a new attempt of a specific run, a key dedupes runs",
        )
    if args.resume and args.resume_latest:
        raise UsageError("--resume and --resume-latest are exclusive", hint="pass only one of them")
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel must be at least 1")
    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    _log_config_warnings(project.config.warnings)
    load = _load_pipeline(project, args)
    if load is not None:
        from rocky_engine.run.load import execute_load

        return execute_load(project, load)
    options = RunOptions(
        pipeline=args.pipeline,
        filter=args.filter,
        model=args.model,
        parallel=args.parallel,
        resume=args.resume,
        resume_latest=args.resume_latest,
        idempotency_key=key,
        variables=_parse_vars(args.var),
        trigger=trigger_from_env(os.environ),
        submission_id=os.environ.get("ROCKY_SUBMISSION_ID") or None,
    )
    return execute_run(project, options)
