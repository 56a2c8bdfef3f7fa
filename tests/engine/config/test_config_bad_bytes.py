"""Bytes that are not UTF-8 and TOML nested hundreds deep are one-line config errors (issue 13 item 13).

Both used to escape as ``UnicodeDecodeError`` / ``RecursionError`` from a model sidecar, ``_defaults.toml``
or rocky.toml and reach the user as "internal error". Each file rocky reads as TOML is tried with both,
through ``rocky validate`` (a V001 / V013 message) and ``rocky run`` (one ``error:`` line, exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.inprocess import rocky_in_process
from tests.fixtures.projects import TRANSFORMATION_TOML, run_rocky

NOT_UTF8 = b'name = "caf\xe9"\n'  # Latin-1, as an editor on another machine may save it
DEEP_ARRAY = ("x = " + "[" * 600 + "]" * 600 + "\n").encode()
DEEP_TABLE = ("x = " + "{ a = " * 600 + "1" + " }" * 600 + "\n").encode()

#: the file that carries the bad content, relative to the project, and the validate code that reports it
FILES = {
    "rocky.toml": "V001",
    "models/m.toml": "V013",
    "models/_defaults.toml": "V013",
    "models/marts/_defaults.toml": "V013",
}
CONTENT = {"not UTF-8": NOT_UTF8, "deep arrays": DEEP_ARRAY, "deep inline tables": DEEP_TABLE}
EXPECTED = {
    "not UTF-8": "the file is not UTF-8 text (byte 0xe9 at offset ",
    "deep arrays": "invalid TOML: arrays or inline tables are nested too deeply to read",
    "deep inline tables": "invalid TOML: arrays or inline tables are nested too deeply to read",
}


def _project(root: Path, bad_file: str, content: bytes) -> Path:
    config = root / "rocky.toml"
    config.write_text(TRANSFORMATION_TOML.format(pipeline="models"))
    (root / "models" / "marts").mkdir(parents=True)
    (root / "models" / "m.sql").write_text("select 1 as a\n")
    (root / "models" / "marts" / "fct.sql").write_text("select * from m\n")
    target = root / bad_file
    if bad_file == "rocky.toml":
        content = config.read_bytes() + content
    target.write_bytes(content)
    return config


@pytest.mark.parametrize("content", list(CONTENT))
@pytest.mark.parametrize("bad_file", list(FILES))
def test_bad_bytes_and_deep_nesting_are_one_line_errors(tmp_path: Path, bad_file: str, content: str) -> None:
    config = _project(tmp_path, bad_file, CONTENT[content])
    where = f"{tmp_path / bad_file}: "

    validate = rocky_in_process(["-c", str(config), "validate", "--output", "json"])
    assert validate.returncode == 1
    [message] = [m for m in json.loads(validate.stdout)["messages"] if m["severity"] == "error"]
    assert message["code"] == FILES[bad_file]
    assert where in message["message"] and EXPECTED[content] in message["message"], message

    run = rocky_in_process(["-c", str(config), "run", "--output", "json"])
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.error_lines) == 1, run.stderr
    assert where in run.error_lines[0] and EXPECTED[content] in run.error_lines[0]
    assert "internal error" not in run.stderr


def test_a_real_rocky_run_with_a_latin1_sidecar(tmp_path: Path) -> None:
    config = _project(tmp_path, "models/m.toml", NOT_UTF8)
    result = run_rocky(["-c", str(config), "run"], cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'models' / 'm.toml'}: the file is not UTF-8 text (byte 0xe9 at offset 11); "
        "save it as UTF-8"
    )
