"""Loading model files: sidecars, strategies, targets, ``_defaults.toml`` inheritance and load errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.errors import ConfigError, ModelError
from rocky_engine.models import ModelSet, ModelTarget, Strategy, load_models, models_base_dir


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(root: Path, env: dict[str, str] | None = None, glob: str = "models/**") -> ModelSet:
    return load_models(glob, root, env or {})


# ---------------------------------------------------------------------- files and names


def test_plain_sql_file_gets_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "models/orders.sql", "SELECT 1 AS id\n")
    ms = load(tmp_path)
    model = ms.models["orders"]
    assert model.path == path
    assert model.sql == "SELECT 1 AS id\n"
    assert model.strategy == Strategy(type="full_refresh")
    assert model.target == ModelTarget(catalog=None, schema=None, table="orders")
    assert model.depends_on == []
    assert model.max_lag_seconds is None
    assert len(ms) == 1


def test_sql_hash_is_sha256_prefix_of_the_file_text(tmp_path: Path) -> None:
    import hashlib

    write(tmp_path, "models/a.sql", "SELECT 42 AS x")
    assert load(tmp_path).models["a"].sql_hash == hashlib.sha256(b"SELECT 42 AS x").hexdigest()[:16]


def test_sidecar_name_overrides_the_stem(tmp_path: Path) -> None:
    write(tmp_path, "models/file_stem.sql", "SELECT 1")
    write(tmp_path, "models/file_stem.toml", 'name = "orders_clean"\n')
    ms = load(tmp_path)
    assert list(ms.models) == ["orders_clean"]
    assert ms.models["orders_clean"].target.table == "orders_clean"


def test_models_in_nested_directories_are_found(tmp_path: Path) -> None:
    write(tmp_path, "models/a.sql", "SELECT 1")
    write(tmp_path, "models/x/b.sql", "SELECT 1")
    write(tmp_path, "models/x/y/z/c.sql", "SELECT 1")
    write(tmp_path, "models/x/notes.txt", "not a model")
    assert sorted(load(tmp_path).models) == ["a", "b", "c"]


def test_a_narrower_glob_selects_a_subset(tmp_path: Path) -> None:
    write(tmp_path, "models/staging/a.sql", "SELECT 1")
    write(tmp_path, "models/marts/b.sql", "SELECT 1")
    assert sorted(load(tmp_path, glob="models/staging/*.sql").models) == ["a"]
    assert models_base_dir("models/staging/*.sql", tmp_path) == tmp_path / "models" / "staging"
    assert models_base_dir("models/**", tmp_path) == tmp_path / "models"


def test_missing_models_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"models directory {tmp_path / 'models'} does not exist; create it, or point `models` in the "
        "transformation pipeline at the right glob"
    )


def test_empty_models_directory_loads_nothing(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    ms = load(tmp_path)
    assert len(ms) == 0 and ms.order == []


@pytest.mark.parametrize("body", ["", "   \n\t\n"])
def test_empty_model_file(tmp_path: Path, body: str) -> None:
    path = write(tmp_path, "models/empty.sql", body)
    with pytest.raises(ModelError) as info:
        load(tmp_path)
    assert str(info.value) == f"model file {path} is empty; write one SELECT statement in it"


def test_duplicate_names_from_two_directories(tmp_path: Path) -> None:
    first = write(tmp_path, "models/a/orders.sql", "SELECT 1")
    second = write(tmp_path, "models/b/orders.sql", "SELECT 2")
    with pytest.raises(ModelError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"two models are named 'orders': {first} and {second}; "
        "rename one file or set a distinct `name` in its sidecar"
    )


def test_duplicate_name_through_a_sidecar(tmp_path: Path) -> None:
    write(tmp_path, "models/orders.sql", "SELECT 1")
    write(tmp_path, "models/other.sql", "SELECT 2")
    write(tmp_path, "models/other.toml", 'name = "orders"\n')
    with pytest.raises(ModelError, match="two models are named 'orders'"):
        load(tmp_path)


# ---------------------------------------------------------------------- sidecars


@pytest.mark.parametrize(
    ("strategy_toml", "expected"),
    [
        ("", Strategy(type="full_refresh")),
        ('type = "full_refresh"', Strategy(type="full_refresh")),
        ('type = "view"', Strategy(type="view")),
        ('type = "ephemeral"', Strategy(type="ephemeral")),
        (
            'type = "incremental"\ntimestamp_column = "updated_at"',
            Strategy(type="incremental", timestamp_column="updated_at"),
        ),
        ('type = "merge"\nunique_key = "id"', Strategy(type="merge", unique_key=("id",))),
        (
            'type = "merge"\nunique_key = ["a", "b"]\nupdate_columns = ["v"]',
            Strategy(type="merge", unique_key=("a", "b"), update_columns=("v",)),
        ),
        (
            'type = "delete_insert"\npartition_by = ["day", "region"]',
            Strategy(type="delete_insert", partition_by=("day", "region")),
        ),
    ],
)
def test_each_strategy(tmp_path: Path, strategy_toml: str, expected: Strategy) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(tmp_path, "models/m.toml", f"[strategy]\n{strategy_toml}\n")
    assert load(tmp_path).models["m"].strategy == expected


@pytest.mark.parametrize(
    ("stype", "key"),
    [("incremental", "timestamp_column"), ("merge", "unique_key"), ("delete_insert", "partition_by")],
)
def test_strategy_required_keys(tmp_path: Path, stype: str, key: str) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", f'[strategy]\ntype = "{stype}"\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"{sidecar}: strategy.{key}: strategy '{stype}' needs `{key}`; add {key} = ... under [strategy]"
    )


def test_unknown_strategy_type(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", '[strategy]\ntype = "scd2"\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"{sidecar}: strategy.type: unknown strategy type 'scd2'; use one of: full_refresh, incremental, "
        "merge, view, ephemeral, delete_insert"
    )


def test_strategy_list_of_wrong_type(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", '[strategy]\ntype = "merge"\nunique_key = [1, 2]\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{sidecar}: strategy.unique_key: must be a string or a list of strings"


def test_target_and_freshness(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(
        tmp_path,
        "models/m.toml",
        '[target]\ncatalog = "wh"\nschema = "marts"\ntable = "orders_v2"\n\n'
        "[freshness]\nmax_lag_seconds = 3600\n",
    )
    model = load(tmp_path).models["m"]
    assert model.target == ModelTarget(catalog="wh", schema="marts", table="orders_v2")
    assert model.max_lag_seconds == 3600


def test_freshness_inline_table(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(tmp_path, "models/m.toml", "freshness = { max_lag_seconds = 60 }\n")
    assert load(tmp_path).models["m"].max_lag_seconds == 60


@pytest.mark.parametrize("value", ["0", "-5", '"1h"', "true", "1.5"])
def test_freshness_must_be_a_positive_integer(tmp_path: Path, value: str) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", f"[freshness]\nmax_lag_seconds = {value}\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"{sidecar}: freshness.max_lag_seconds: max_lag_seconds must be a positive integer"
    )


def test_freshness_must_be_a_table(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", "freshness = 3600\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"{sidecar}: freshness: freshness must be a table; write freshness = {{ max_lag_seconds = 3600 }}"
    )


def test_unknown_top_level_sidecar_key(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", 'materialized = "table"\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"{sidecar}: unknown key 'materialized'; valid keys: depends_on, description, freshness, name, "
        "owners, strategy, tags, target"
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[strategy]\ntype = "incremental"\ntimestamp_column = "ts"\ntimestamp_colum = "ts"\n',
            "unknown key 'strategy.timestamp_colum'; valid keys under [strategy]: atomic, partition_by, "
            "timestamp_column, type, unique_key, update_columns",
        ),
        (
            '[target]\nschemaa = "marts"\n',
            "unknown key 'target.schemaa'; valid keys under [target]: catalog, schema, table",
        ),
        (
            "[freshness]\nmax_lag = 5\n",
            "unknown key 'freshness.max_lag'; valid keys under [freshness]: max_lag_seconds",
        ),
    ],
)
def test_unknown_keys_in_sidecar_tables(tmp_path: Path, toml: str, message: str) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", toml)
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{sidecar}: {message}"


def test_description_and_tags_are_accepted(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(tmp_path, "models/m.toml", 'description = "orders"\ntags = ["finance"]\n')
    assert "m" in load(tmp_path).models


@pytest.mark.parametrize(("toml", "key"), [("target = 5\n", "target"), ("strategy = 5\n", "strategy")])
def test_sections_must_be_tables(tmp_path: Path, toml: str, key: str) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", toml)
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{sidecar}: {key}: [{key}] must be a table"


def test_depends_on_must_be_a_list_of_names(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", "depends_on = [1]\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{sidecar}: depends_on: depends_on must be a list of model names"


def test_invalid_sidecar_toml_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", "[strategy\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value).startswith(f"{sidecar}: invalid TOML: ")
    assert str(info.value).endswith("; fix the syntax at that line and column")


# ---------------------------------------------------------------------- ${VAR}


def test_env_substitution_in_sidecars(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(
        tmp_path,
        "models/m.toml",
        '[target]\nschema = "${MARTS_SCHEMA}"\ntable = "${TABLE:-orders}"\n'
        "[freshness]\nmax_lag_seconds = ${LAG}\n",
    )
    model = load(tmp_path, env={"MARTS_SCHEMA": "prod_marts", "LAG": "900"}).models["m"]
    assert model.target == ModelTarget(catalog=None, schema="prod_marts", table="orders")
    assert model.max_lag_seconds == 900


def test_env_substitution_never_touches_sql(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT '${HOME}' AS literal")
    assert load(tmp_path, env={"HOME": "/root"}).models["m"].sql == "SELECT '${HOME}' AS literal"


def test_unset_variable_in_sidecar(tmp_path: Path) -> None:
    write(tmp_path, "models/m.sql", "SELECT 1")
    sidecar = write(tmp_path, "models/m.toml", '[target]\nschema = "${NOPE_SCHEMA}"\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == (
        f"environment variable NOPE_SCHEMA is not set (referenced in {sidecar}); "
        "export it or use ${NOPE_SCHEMA:-default}"
    )


def test_env_substitution_in_defaults(tmp_path: Path) -> None:
    write(tmp_path, "models/_defaults.toml", '[target]\ncatalog = "${CAT}"\n')
    write(tmp_path, "models/m.sql", "SELECT 1")
    assert load(tmp_path, env={"CAT": "lake"}).models["m"].target.catalog == "lake"


# ---------------------------------------------------------------------- _defaults.toml


def test_defaults_inherit_through_nested_directories_nearest_wins(tmp_path: Path) -> None:
    write(tmp_path, "models/_defaults.toml", '[target]\ncatalog = "wh"\nschema = "base"\n')
    write(tmp_path, "models/marts/_defaults.toml", '[target]\nschema = "marts"\n')
    write(tmp_path, "models/marts/finance/_defaults.toml", '[target]\nschema = "finance"\n')
    write(tmp_path, "models/top.sql", "SELECT 1")
    write(tmp_path, "models/marts/m1.sql", "SELECT 1")
    write(tmp_path, "models/marts/finance/f1.sql", "SELECT 1")
    write(tmp_path, "models/marts/finance/deep/f2.sql", "SELECT 1")  # no defaults of its own
    write(tmp_path, "models/staging/s1.sql", "SELECT 1")
    targets = {name: m.target for name, m in load(tmp_path).models.items()}
    assert targets == {
        "top": ModelTarget("wh", "base", "top"),
        "m1": ModelTarget("wh", "marts", "m1"),
        "f1": ModelTarget("wh", "finance", "f1"),
        "f2": ModelTarget("wh", "finance", "f2"),
        "s1": ModelTarget("wh", "base", "s1"),
    }


def test_sidecar_target_beats_defaults_key_by_key(tmp_path: Path) -> None:
    write(tmp_path, "models/_defaults.toml", '[target]\ncatalog = "wh"\nschema = "marts"\n')
    write(tmp_path, "models/m.sql", "SELECT 1")
    write(tmp_path, "models/m.toml", '[target]\nschema = "special"\n')
    assert load(tmp_path).models["m"].target == ModelTarget("wh", "special", "m")


def test_defaults_outside_the_models_dir_are_not_read(tmp_path: Path) -> None:
    write(tmp_path, "_defaults.toml", '[target]\nschema = "wrong"\n')
    write(tmp_path, "models/m.sql", "SELECT 1")
    assert load(tmp_path).models["m"].target.schema is None


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[tests]\nx = 1\n', "unknown key 'tests'; valid keys: strategy, target"),
        ('[strategy]\ntimestamp_colum = "ts"\n',
         "unknown key 'strategy.timestamp_colum'; valid keys under [strategy]: atomic, partition_by, "
         "timestamp_column, type, unique_key, update_columns"),
        (
            '[target]\ntable = "shared"\n',
            "unknown key 'target.table'; valid keys under [target]: catalog, schema",
        ),
        ("target = 1\n", "target: [target] must be a table"),
    ],
)
def test_defaults_reject_what_they_cannot_supply(tmp_path: Path, toml: str, message: str) -> None:
    defaults = write(tmp_path, "models/_defaults.toml", toml)
    write(tmp_path, "models/m.sql", "SELECT 1")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{defaults}: {message}"
