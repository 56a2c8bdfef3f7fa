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
    p.add_argument(
        "--model", action="append", default=[], metavar="SELECTOR",
        help="transformation only: run just this model (repeatable; +NAME adds its upstream models, NAME+ "
        "its downstream ones); the selected models run in DAG order in this one process",
    )
    # `--models` (a directory) and `--model` (a model name) are distinct flags: argparse matches an exact
    # option string before any prefix, so neither swallows the other.
    p.add_argument("--models", metavar="DIR",
                   help="transformation: read the models from DIR (relative to the working directory) "
                   "instead of the pipeline's `models` glob")
    p.add_argument("--all", action="store_true",
                   help="transformation: run every model (the default; upstream clients send it with "
                   "--models); refused with --model")
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
    add_wait_flag(p)


def add_wait_flag(parser: Any) -> None:
    """``--wait-for-lock SECONDS`` (``run`` and ``load``)."""
    parser.add_argument(
        "--wait-for-lock", type=float, default=0, metavar="SECONDS",
        help="wait up to SECONDS for the state store's writer lock when another rocky holds it (logged "
        "once, naming the holder), then fail as usual (default 0: fail at once)",
    )


def wait_seconds(args: argparse.Namespace) -> float:
    from rocky_engine.errors import UsageError

    value = float(getattr(args, "wait_for_lock", 0) or 0)
    if value < 0 or value != value:  # NaN compares unequal to itself
        raise UsageError("--wait-for-lock must be a number of seconds, 0 or more")
    return value


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


def _models_flags(project: Any, args: argparse.Namespace) -> None:
    """Apply ``--models DIR`` / ``--all`` (upstream Rocky's run flags) before the pipeline is chosen."""
    from rocky_engine.errors import UsageError
    from rocky_engine.run.runner import choose_pipeline

    if args.models is not None:
        from rocky_engine.models.models_flag import point_models_at

        args.pipeline = point_models_at(project.config, args.models, args.pipeline)
    if not args.all:
        return
    if args.model:
        raise UsageError("--all and --model are exclusive",
                         hint="--all runs every model; --model runs one")
    name = choose_pipeline(project, args.pipeline)
    kind = project.config.pipeline(name).type
    if kind != "transformation":
        raise UsageError(f"--all applies to transformation pipelines; pipeline '{name}' is a {kind} pipeline",
                         hint="drop --all")


def _note_upstream_store(project: Any) -> None:
    """On the first run (no store of ours yet), say that an upstream ``.rocky-state.redb`` is not read."""
    from rocky_engine.logs import get_logger
    from rocky_engine.state.location import upstream_store_beside, upstream_store_message

    store = project.state_path()
    redb = None if store.exists() else upstream_store_beside(store)
    if redb is not None:
        get_logger("state").warning(upstream_store_message(redb))


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
    _models_flags(project, args)
    load = _load_pipeline(project, args)
    if load is not None:
        from rocky_engine.run.load import execute_load

        return execute_load(project, load, wait_for_lock=wait_seconds(args))
    _note_upstream_store(project)
    options = RunOptions(
        pipeline=args.pipeline,
        filter=args.filter,
        models=tuple(args.model),
        parallel=args.parallel,
        resume=args.resume,
        resume_latest=args.resume_latest,
        idempotency_key=key,
        variables=_parse_vars(args.var),
        trigger=trigger_from_env(os.environ),
        submission_id=os.environ.get("ROCKY_SUBMISSION_ID") or None,
        wait_for_lock=wait_seconds(args),
    )
    return execute_run(project, options)
