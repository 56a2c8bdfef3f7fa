"""The loader's fast paths keep its results: warnings in nested tables and lists, the assembled config,
the garbage collector's state, and which annotations the unknown-key walk skips."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel

from rocky_engine.config import RockyConfig, load_config
from rocky_engine.config.pipelines import PipelineConfig
from rocky_engine.config.unknown_keys import _may_hold_model
from rocky_engine.errors import ConfigError

PROJECT = """
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
[pipeline.raw.source]
schema_pattern = { prefix = "src__", components = ["tenant"] }
[pipeline.raw.source.discovery]
adapter = "default"
adaptr = "x"
[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{tenant}"
[[pipeline.raw.metadata_columns]]
name = "a"
type = "INT"
value = "1"
[[pipeline.raw.metadata_columns]]
name = "b"
type = "INT"
value = "2"
vlaue = "3"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rocky.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_optional_and_listed_nested_tables_are_walked(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, PROJECT), env={})
    assert cfg.warnings == [
        "unknown key 'vlaue' in [pipeline.raw.metadata_columns[1]] is ignored; did you mean 'value'? "
        "valid keys: name, type, value",
        "unknown key 'adaptr' in [pipeline.raw.source.discovery] is ignored; did you mean 'adapter'? "
        "valid keys: adapter",
    ]


def test_assembled_config_equals_a_validated_one(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, PROJECT), env={})
    validated = RockyConfig.model_validate(dict(cfg))
    assert validated == cfg
    assert cfg.model_fields_set == set(RockyConfig.model_fields)


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_state_is_left_as_found(tmp_path: Path, enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        load_config(write(tmp_path, PROJECT), env={})
        assert gc.isenabled() is enabled
        with pytest.raises(ConfigError, match="invalid TOML"):
            load_config(write(tmp_path, "[adapter\n"), env={})
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


class _Table(BaseModel):
    x: int = 0


@pytest.mark.parametrize(
    ("annotation", "holds"),
    [
        (str, False),
        (int | None, False),
        (list[str], False),
        (dict[str, str], False),
        (Literal["a", "b"], False),
        (Literal["a"] | None, False),
        (Annotated[int, "meta"], False),
        (_Table, True),
        (_Table | None, True),
        (list[_Table], True),
        (dict[str, _Table], True),
        (tuple[_Table, ...], True),
        (Annotated[_Table, "meta"], True),
        (PipelineConfig, True),
        (Any, True),
        (object, True),
        (list, True),
        (dict[str, Any], True),
    ],
)
def test_only_fields_that_cannot_hold_a_table_are_skipped(annotation: Any, holds: bool) -> None:
    assert _may_hold_model(annotation) is holds
