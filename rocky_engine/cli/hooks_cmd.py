"""``rocky hooks list`` (command hooks only) and ``rocky hooks test on_<event>`` (fire a synthetic event)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.output import Result


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "hooks",
        parents=[common],
        help="list the command hooks, or fire a test event at the hooks of one event",
        description="`rocky hooks list` prints the command hooks Rocky loaded ([[hook.on_<event>]]; webhooks "
        "are not listed: check them with `rocky validate`). `rocky hooks test on_<event>` fires a "
        "synthetic event at that event's command hooks and webhook and reports what each did; exit 1 when "
        "one failed.",
    )
    actions = parser.add_subparsers(dest="hooks_action", metavar="<action>")
    actions.required = True
    actions.add_parser("list", parents=[common], help="list the command hooks by event")
    test = actions.add_parser(
        "test", parents=[common], help="fire a synthetic event at the hooks of one event",
        description="Fire a synthetic on_<event> (run_id hooks-test-..., metadata.test = true) at the "
        "command hooks and the webhook of that event. Command hooks really run and webhooks are really "
        "delivered.",
    )
    test.add_argument("event", metavar="on_<event>", help="the event to fire, e.g. on_pipeline_error")
    test.add_argument("--pipeline", help="pipeline name in the event context (default: the first pipeline)")


def execute(args: argparse.Namespace) -> Result:
    from rocky_engine.hooks.report import hooks_list, hooks_test
    from rocky_engine.project import load_project

    project = load_project(args.config, state_path=args.state_path, state_namespace=args.state_namespace)
    if args.hooks_action == "list":
        return hooks_list(project.config)
    return hooks_test(project.config, args.event, pipeline=args.pipeline)
