"""Fuzzing rocky.toml, model sidecars and ``_defaults.toml`` (issue 13, "Done when").

A seeded generator mutates a complete project a few hundred ways (wrong values and types, typos in keys
and headers, deleted and duplicated lines, stray bytes that are not UTF-8, truncation, ``${VAR}``
references, nesting hundreds deep) and runs ``rocky validate`` plus one other command on each, in this
process through the CLI's own entry point. Every outcome must be one the CLI documents: no traceback, no
"internal error", no hang, an exit code the command can give, and a refusal that is exactly one
``error:`` line (or, for the commands that report, a JSON document). A handful of the refusals are then
replayed through real ``rocky`` processes.

Reproduce a failure with ``ROCKY_FUZZ_SEED=<seed>`` (printed in the message); ``ROCKY_FUZZ_CASES``
changes how many projects are tried.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.inprocess import InProcess, assert_no_traceback, rocky_in_process
from tests.fixtures.projects import run_rocky

SEED = int(os.environ.get("ROCKY_FUZZ_SEED", "20261302"))
CASES = int(os.environ.get("ROCKY_FUZZ_CASES", "300"))

ROCKY_TOML = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[schedule]
timezone = "UTC"

[freshness]
expected_lag_seconds = 3600

[state]
backend = "local"
on_schema_mismatch = "recreate"

[state.idempotency]
retention_days = 30
dedup_on = "success"

[pipeline.models]
type = "transformation"
models = "models/**"

[pipeline.models.execution]
concurrency = 2
fail_fast = false

[pipeline.models.checks]
row_count = true

[pipeline.models.schedule]
cron = "0 * * * *"
timezone = "Europe/Lisbon"
freshness = false
catchup = "latest"
retry = { max = 1 }
timeout_minutes = 30
enabled = true

[pipeline.downstream]
type = "transformation"
models = "models/**"
depends_on = ["models"]

[pipeline.downstream.schedule]
after = ["models"]

[[hook.on_pipeline_error]]
command = "true"
timeout_ms = 2000
"""
FILES = {
    "rocky.toml": ROCKY_TOML,
    "models/m.sql": "select 1 as a\n",
    "models/m.toml": 'name = "m"\ndepends_on = []\nfreshness = { max_lag_seconds = 3600 }\n\n[strategy]\n'
    'type = "full_refresh"\n\n[target]\ntable = "m"\n',
    "models/_defaults.toml": '[target]\ncatalog = "wh"\nschema = "main"\n',
    "models/marts/fct.sql": "select a from m\n",
    "models/marts/_defaults.toml": '[target]\nschema = "marts"\n',
}
#: the files a case mutates, with their weights
MUTABLE = {"rocky.toml": 6, "models/m.toml": 2, "models/_defaults.toml": 1, "models/marts/_defaults.toml": 1}

VALUES = [
    '"yes"', '"no"', '"true"', "1", "0", "-1", "1.5", "true", "false", "[]", '["x"]', '[1, "a"]', "{}",
    '{ max = "2" }', "{ max = -1 }", "2026-01-01T00:00:00Z", "1979-05-27", '"${ROCKY_FUZZ_UNSET}"',
    '"${ROCKY_FUZZ_UNSET:-fallback}"', '"' + "x" * 5000 + '"', '"\\u0000"', '"Mars/Olympus_Mons"',
    '"61 * * * *"', '"* * *"', "nan", "inf", '"adaptive"', '"../../etc"', '"models/**"', '""', "'''a\nb'''",
]
LINES = [
    "unknown_key = 1", '[pipeline.extra]\ntype = "load"', '[pipeline.models.schedule.nested]\nx = 1',
    'type = "replication"', "[adapter.other]", '[[hook.on_nope]]\ncommand = "x"', "[connector.c]",
    'depends_on = "models"', "[pipeline]", "[[pipeline.models]]", "= 1", "key =", '"quoted key" = 1',
    '"a\\u001cb" = 1', "[state]\nbackend = 1",
]

Mutation = Callable[[random.Random, str], str]


def _deep(rng: random.Random) -> str:
    depth = rng.choice([300, 600, 2000])
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    return "{ a = " * depth + "1" + " }" * depth


def replace_value(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    slots = [i for i, line in enumerate(lines) if re.match(r"^\s*[\w\"]+\s*=", line)]
    if not slots:
        return text
    i = rng.choice(slots)
    key = lines[i].split("=", 1)[0]
    value = _deep(rng) if rng.random() < 0.1 else rng.choice(VALUES)
    lines[i] = f"{key}= {value}"
    return "\n".join(lines)


def typo(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    line = lines[i]
    if not line:
        return text
    j = rng.randrange(len(line))
    edit = rng.choice(["drop", "double", "swap", "char"])
    if edit == "drop":
        line = line[:j] + line[j + 1 :]
    elif edit == "double":
        line = line[:j] + line[j] + line[j:]
    elif edit == "swap" and j + 1 < len(line):
        line = line[:j] + line[j + 1] + line[j] + line[j + 2 :]
    else:
        line = line[:j] + rng.choice("[]{}=\"'.#,\\ x") + line[j + 1 :]
    lines[i] = line
    return "\n".join(lines)


def shuffle_lines(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    op = rng.choice(["delete", "duplicate", "move"])
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    else:
        lines.insert(rng.randrange(len(lines)), lines.pop(i))
    return "\n".join(lines)


def insert_line(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    extra = rng.choice(LINES)
    if rng.random() < 0.1:
        extra = "[" + ".".join(["a"] * rng.choice([50, 600])) + "]\nx = 1"
    lines.insert(rng.randrange(len(lines) + 1), extra)
    return "\n".join(lines)


def deep_value(rng: random.Random, text: str) -> str:
    return text + f"\ndeep = {_deep(rng)}\n"


MUTATIONS: list[Mutation] = [replace_value, typo, shuffle_lines, insert_line, deep_value]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Byte-level damage: stray non-UTF-8 or control bytes, or a cut."""
    op = rng.choice(["insert", "overwrite", "truncate", "latin1"])
    at = rng.randrange(len(data) + 1)
    if op == "truncate":
        return data[:at]
    if op == "latin1":
        return data[:at] + "é".encode("latin-1") + data[at:]
    junk = bytes(rng.choice([0x00, 0x0D, 0x1B, 0x80, 0xC3, 0xFF, 0xFE, rng.randrange(256)])
                 for _ in range(rng.randint(1, 6)))
    if op == "insert":
        return data[:at] + junk + data[at:]
    return data[:at] + junk + data[at + len(junk) :]


#: commands tried besides validate (argv after -c CONFIG), the exit codes each may give, and whether a
#: refusal is reported in its JSON document rather than as an ``error:`` line
COMMANDS: list[tuple[list[str], frozenset[int], bool]] = [
    (["run", "--pipeline", "models"], frozenset({0, 1, 2}), False),
    (["tick", "--dry-run", "--now", "2026-05-02T03:10:00Z"], frozenset({0, 1}), False),
    (["doctor", "--check", "config"], frozenset({0, 3}), True),
    (["doctor", "--check", "pipelines"], frozenset({0, 3}), True),
    (["ci"], frozenset({0, 1}), True),
    (["hooks", "list"], frozenset({0, 1}), False),
    (["brief", "--now", "2026-05-02T03:10:00Z"], frozenset({0, 1}), False),
]
_LOG_LINE = re.compile(r'^(error|warning|info|debug): |^\{"ts": ')


@dataclass
class Case:
    index: int
    file: str
    content: bytes
    argv: list[str]
    codes: frozenset[int]
    reported: bool

    def describe(self) -> str:
        shown = self.content[:600].decode("utf-8", "backslashreplace")
        return (f"ROCKY_FUZZ_SEED={SEED} case {self.index}: {self.file} mutated, then rocky "
                f"{' '.join(self.argv)}\n--- {self.file} (first 600 bytes)\n{shown}")


def make_case(rng: random.Random, index: int) -> Case:
    file = rng.choices(list(MUTABLE), weights=list(MUTABLE.values()))[0]
    text = FILES[file]
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(rng, text)
    content = text.encode("utf-8")
    if rng.random() < 0.25:
        content = mutate_bytes(rng, content)
    argv, codes, reported = rng.choice(COMMANDS)
    return Case(index, file, content, argv, codes, reported)


def write_project(root: Path, case: Case) -> Path:
    if root.exists():
        shutil.rmtree(root)
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / case.file).write_bytes(case.content)
    return root / "rocky.toml"


def check_outcome(result: InProcess, codes: frozenset[int], reported: bool, what: str) -> None:
    assert_no_traceback(result, what)
    assert result.returncode in codes, f"exit {result.returncode}: {what}\n{result.stderr[-1500:]}"
    stray = [line for line in result.stderr.splitlines() if line and not _LOG_LINE.match(line)]
    assert not stray, f"stderr lines that are not one-line messages {stray[:3]}: {what}"
    if result.returncode in (0, 2, 3) or reported:
        json.loads(result.stdout)  # a document, whole
    elif result.returncode == 1 and not result.error_lines:
        json.loads(result.stdout)  # a run that failed prints its document instead of an error line


def _validate(config: Path) -> InProcess:
    return rocky_in_process(["-c", str(config), "validate", "--output", "json"], deadline_seconds=60)


@pytest.mark.slow
def test_mutated_configs_never_crash(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    refusals: list[tuple[Case, str]] = []
    for index in range(CASES):
        case = make_case(rng, index)
        config = write_project(tmp_path / "project", case)
        validate = _validate(config)
        check_outcome(validate, frozenset({0, 1}), True, case.describe())
        for message in json.loads(validate.stdout)["messages"]:
            assert "\n" not in message["message"] and message["message"].isprintable(), case.describe()
        result = rocky_in_process(
            ["-c", str(config), *case.argv, "--output", "json"], deadline_seconds=60
        )
        check_outcome(result, case.codes, case.reported, case.describe())
        # replayed below: the first three refusals of rocky.toml and the first three of a model file
        same_file = [c for c, _ in refusals if (c.file == "rocky.toml") == (case.file == "rocky.toml")]
        if result.error_lines and len(same_file) < 3:
            refusals.append((case, result.error_lines[0]))
    assert refusals, "the generator produced no refusal at all: it is not mutating anything"

    # the same refusals from real processes
    for case, line in refusals:
        config = write_project(tmp_path / "project", case)
        real = run_rocky(["-c", str(config), *case.argv, "--output", "json"], cwd=tmp_path / "project",
                         timeout=120)
        assert real.returncode == 1, case.describe()
        assert [x for x in real.stderr.splitlines() if x.startswith("error:")] == [line], case.describe()
