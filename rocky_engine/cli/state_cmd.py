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
    from rocky_engine.state.location import project_state_path
    from rocky_engine.state.store import StateStore

    path = project_state_path(Path(args.config), args.state_path, args.state_namespace)
    with StateStore.open(path, writer=False) as store:
        return build_watermarks(store)


#: action name -> handler; ``execute`` dispatches here.
ACTIONS: dict[str, Callable[[argparse.Namespace], Result]] = {
    DEFAULT_ACTION: _watermarks,
}
