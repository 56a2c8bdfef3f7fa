"""docs/reference-cli.md follows the engine: every flag a command takes is in its synopsis, and the
synopsis names no flag the command does not take (issue 13 item 9: the docs said ``--filter`` on a
transformation pipeline was ignored while the engine refused it)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from rocky_engine.cli.main import COMMANDS, build_parser
from tests.fixtures.inprocess import rocky_in_process

DOC = Path(__file__).resolve().parents[3] / "docs" / "reference-cli.md"
GLOBAL = {"-c", "--config", "-o", "--output", "--state-path", "--state-namespace", "-h", "--help"}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """The documented (not hidden) long flags of a command and of its sub-commands."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found |= _flags(child)
        elif action.help != argparse.SUPPRESS:
            found |= {o for o in action.option_strings if o.startswith("--")}
    return found - GLOBAL


def _synopsis(command: str) -> set[str]:
    sections = re.split(r"^## `rocky (\w+)`", DOC.read_text(), flags=re.M)
    text = dict(zip(sections[1::2], sections[2::2], strict=True))[command]
    block = re.search(r"```\n(.*?)```", text, re.S)
    assert block, f"no synopsis block under ## `rocky {command}`"
    return set(re.findall(r"--[a-z][a-z-]*", block.group(1))) - GLOBAL


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_synopsis_lists_exactly_the_flags_the_command_takes(command: str) -> None:
    parser, _ = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert _synopsis(command) == _flags(commands.choices[command])


def test_filter_on_a_transformation_pipeline_is_refused_as_the_docs_say(tmp_path: Path) -> None:
    doc = " ".join(DOC.read_text().split())
    quoted = re.search(r"it is refused before anything runs \(exit 1\): `([^`]+)`", doc)
    assert quoted, "the --filter row no longer says what the engine does"
    config = tmp_path / "rocky.toml"
    config.write_text('[adapter]\ntype = "duckdb"\n[pipeline.models]\ntype = "transformation"\n')
    (tmp_path / "models").mkdir()
    result = rocky_in_process(["-c", str(config), "run", "--pipeline", "models", "--filter", "table=x"])
    assert result.returncode == 1
    assert result.error_lines == [f"error: {quoted.group(1)}"]
