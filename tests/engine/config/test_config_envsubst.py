"""${VAR} / ${VAR:-default} substitution on raw config text."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.config import load_config, substitute
from rocky_engine.config.envsubst import references
from rocky_engine.errors import ConfigError

FILE = Path("/p/rocky.toml")


def test_plain_reference() -> None:
    assert substitute('path = "${DB}"', {"DB": "wh.duckdb"}, file=FILE) == 'path = "wh.duckdb"'


def test_default_used_when_unset_or_empty() -> None:
    text = 'a = "${A:-x}"\nb = "${B:-y}"\nc = "${C:-}"'
    assert substitute(text, {"B": ""}, file=FILE) == 'a = "x"\nb = "y"\nc = ""'


def test_default_ignored_when_set() -> None:
    assert substitute('a = "${A:-x}"', {"A": "real"}, file=FILE) == 'a = "real"'


def test_set_but_empty_without_default_is_empty() -> None:
    assert substitute('a = "${A}"', {"A": ""}, file=FILE) == 'a = ""'


def test_unset_without_default_names_variable_and_file() -> None:
    with pytest.raises(ConfigError) as info:
        substitute('key = "${FOO}"', {}, file=FILE)
    assert str(info.value) == (
        "environment variable FOO is not set (referenced in /p/rocky.toml); export it or use ${FOO:-default}"
    )


def test_several_references_on_one_line_and_unquoted_numbers() -> None:
    text = 'dsn = "host=${H} port=${P}"\nport = ${P}\n'
    assert substitute(text, {"H": "db", "P": "5433"}, file=FILE) == 'dsn = "host=db port=5433"\nport = 5433\n'


def test_comment_lines_are_not_substituted() -> None:
    text = '# password = "${UNSET_SECRET}"\n  # ${ALSO_UNSET}\nx = 1\n'
    assert substitute(text, {}, file=FILE) == text


def test_text_without_references_is_returned_as_is() -> None:
    text = "a = '$HOME and $ {X} and ${not valid}'\n"
    assert substitute(text, {}, file=FILE) == text


def test_references_lists_names_once_in_order() -> None:
    assert references('a="${B}"\n# ${C}\nb="${A:-1}${B}"') == ["B", "A"]


def test_load_config_substitutes_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "rocky.toml"
    path.write_text(
        '[adapter]\ntype = "${KIND:-duckdb}"\npath = "${DB}"\n[adapter.retry]\nmax_retries = ${RETRIES:-3}\n'
    )
    cfg = load_config(path, env={"DB": "prod.duckdb", "RETRIES": "9"})
    adapter = cfg.adapter("default")
    assert adapter.type == "duckdb"
    assert adapter.catalog == "prod"
    assert adapter.retry.max_retries == 9


def test_load_config_unset_variable(tmp_path: Path) -> None:
    path = tmp_path / "rocky.toml"
    path.write_text('[adapter]\ntype = "postgres"\npassword = "${PG_PASSWORD}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == (
        f"environment variable PG_PASSWORD is not set (referenced in {path}); "
        "export it or use ${PG_PASSWORD:-default}"
    )


def test_load_config_uses_process_environment_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKY_TEST_DB", "from_env.duckdb")
    path = tmp_path / "rocky.toml"
    path.write_text('[adapter]\ntype = "duckdb"\npath = "${ROCKY_TEST_DB}"\n')
    assert load_config(path).adapter("default").catalog == "from_env"
