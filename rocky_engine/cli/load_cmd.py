"""``rocky load``: load a directory of files into tables (a load pipeline), or run a child connector.

The source is chosen by one flag of an exclusive group: ``--pipeline`` (a load pipeline's source_dir) or
``--connector NAME`` (seeds/child-connectors.md; rocky_engine/connectors/).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "load",
        parents=[common],
        help="load files into tables",
        description="Load every CSV / Parquet / JSONL file of a load pipeline's source_dir into its target, "
        "one transaction per file. Exit 0 all files loaded, 2 some failed, 1 none loaded or a config error. "
        "With --connector NAME, run that child connector once and append its Parquet files to its target "
        "(exit 0 loaded or skipped, 1 failed, 130 interrupted).",
    )
    source = p.add_mutually_exclusive_group()
    add_source_flags(source)
    from rocky_engine.cli.run_cmd import add_wait_flag

    add_wait_flag(p)


def add_source_flags(group: Any) -> None:
    """The flags that pick what to load (one of them)."""
    group.add_argument("--pipeline", help="load pipeline to run (default: the only load pipeline)")
    group.add_argument("--connector", metavar="NAME",
                       help="run the child connector [connector.NAME] once and load what it writes")


def choose_load_pipeline(config: Any, requested: str | None) -> str:
    """``--pipeline``, or the only load pipeline of the project."""
    from rocky_engine.errors import UsageError

    if requested is not None:
        config.pipeline(requested)  # raises with the list of names
        return str(requested)
    loads: list[str] = [name for name, p in config.pipelines.items() if p.type == "load"]
    if len(loads) == 1:
        return loads[0]
    if not loads:
        raise UsageError(f"{config.path} defines no load pipeline",
                         hint='add a [pipeline.NAME] table with type = "load"')
    raise UsageError(f"this project has several load pipelines ({', '.join(loads)})",
                     hint="choose one with --pipeline NAME")


def execute(args: argparse.Namespace) -> Any:
    from rocky_engine.project import load_project
    from rocky_engine.run.load import execute_load

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    if getattr(args, "connector", None) is not None:
        from rocky_engine.connectors.connector_run import execute_connector_load
        from rocky_engine.errors import StateSchemaError

        try:
            return execute_connector_load(project, args.connector)
        except StateSchemaError as exc:
            if project.config.state.on_schema_mismatch != "recreate":
                raise
            # The connector opens its store with "refuse" on purpose: a fresh state would forget its
            # cursor and commit_seq, and the batch would be appended to the target a second time.
            raise StateSchemaError(
                f"{exc.message}; a connector load never runs from a fresh state (on_schema_mismatch = "
                "recreate would forget its cursor and append the batch a second time)",
                hint=exc.hint,
            ) from None
    from rocky_engine.cli.run_cmd import wait_seconds

    name = choose_load_pipeline(project.config, args.pipeline)
    return execute_load(project, name, wait_for_lock=wait_seconds(args))
