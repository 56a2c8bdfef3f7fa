"""``rocky state [watermarks]``: inspect the state store.

Actions are sub-commands of ``state``; with none, ``watermarks`` runs. To add one (for example
``rocky state schedule pause|resume|spool``), write a ``_register_<action>`` that adds its parser to
``actions`` (with ``parents=[common]`` so global flags work after it) and an entry in ``ACTIONS`` mapping
the action name to a function ``(args) -> Result`` that imports its heavy modules inside.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.output import Result

DEFAULT_ACTION = "watermarks"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = subparsers.add_parser(
        "state",
        parents=[common],
        help="inspect the state store (default: list watermarks)",
        description="Inspect the project's state store. Opens it read-only and never takes the writer "
        "lock, so it works while a run is in progress.",
    )
    actions = parser.add_subparsers(dest="state_command", metavar="<action>")
    _register_watermarks(actions, common)
    _register_schedule(actions, common)


def execute(args: argparse.Namespace) -> Result:
    action = getattr(args, "state_command", None) or DEFAULT_ACTION
    return ACTIONS[action](args)


# ---------------------------------------------------------------------- watermarks


def _register_watermarks(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    actions.add_parser(
        "watermarks",
        parents=[common],
        help="list replication watermarks (the default action)",
        description="List every watermark: table key, value, and when it last moved.",
    )


def _watermarks(args: argparse.Namespace) -> Result:
    from pathlib import Path

    from rocky_engine.ops.state_view import build_watermarks
    from rocky_engine.project import project_state_file
    from rocky_engine.state.store import StateStore

    path = project_state_file(Path(args.config), state_path=args.state_path, namespace=args.state_namespace)
    with StateStore.open(path, writer=False) as store:
        return build_watermarks(store)


# ---------------------------------------------------------------------- schedule


def _register_schedule(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = actions.add_parser(
        "schedule",
        parents=[common],
        help="pause or resume a pipeline's schedule; list queued webhook demands",
        description="Scheduler controls. `pause P` holds P (no declared demand evaluated, webhook demands "
        "stay queued) until `resume P`; `spool` lists webhook demands accepted but not yet consumed by "
        "a tick. pause/resume write the state store (they fail fast while a run holds it).",
    )
    sub = parser.add_subparsers(dest="schedule_command", metavar="<pause|resume|spool>")
    sub.required = True
    for name, text in (("pause", "hold a pipeline"), ("resume", "release a held pipeline")):
        p = sub.add_parser(name, parents=[common], help=text, description=f"{text[0].upper()}{text[1:]}.")
        p.add_argument("pipeline", help="pipeline name")
    sub.add_parser(
        "spool",
        parents=[common],
        help="list accepted, unconsumed webhook demands",
        description="List .rocky/pending-demands/: what the webhook ingress accepted and no tick has run "
        "yet. An unreadable spool is an error (exit 1), never an empty list.",
    )


def _schedule(args: argparse.Namespace) -> Result:
    from rocky_engine.ops.schedule_hold import set_hold
    from rocky_engine.project import load_project
    from rocky_engine.schedule.control import spool_listing

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    if args.schedule_command == "spool":
        return spool_listing(project.dot_rocky)
    return set_hold(project, args.pipeline, paused=args.schedule_command == "pause")


#: action name -> handler; ``execute`` dispatches here.
ACTIONS: dict[str, Callable[[argparse.Namespace], Result]] = {
    DEFAULT_ACTION: _watermarks,
    "schedule": _schedule,
}
