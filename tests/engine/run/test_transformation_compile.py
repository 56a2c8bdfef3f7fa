"""Compiling a model: references qualified, ephemeral models inlined as CTEs, variables rendered."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from rocky_engine.adapters.base import TableName, quote_ident
from rocky_engine.errors import ModelError
from rocky_engine.models import ModelSet, load_models
from rocky_engine.run.compile import compile_model


def model_set(tmp_path: Path, models: dict[str, str], ephemeral: tuple[str, ...] = ()) -> ModelSet:
    base = tmp_path / "models"
    base.mkdir(exist_ok=True)
    for name, sql in models.items():
        (base / f"{name}.sql").write_text(sql)
    for name in ephemeral:
        (base / f"{name}.toml").write_text('[strategy]\ntype = "ephemeral"\n')
    return load_models("models/**", tmp_path, {})


def targets(ms: ModelSet, schema: str = "s") -> dict[str, TableName]:
    return {n: TableName("wh", schema, n, f'"wh"."{schema}"."{n}"') for n in ms.models}


def test_resolved_target_names() -> None:
    t = TableName("wh", "marts", "orders", '"wh"."marts"."orders"')
    assert t.full_name == "wh.marts.orders"
    assert t.asset_key == ["wh", "marts", "orders"]


def test_bare_references_become_qualified_targets(tmp_path: Path) -> None:
    ms = model_set(
        tmp_path,
        {
            "a": "SELECT 1 AS x",
            "b": 'SELECT * FROM a JOIN "a" AS q ON true, raw.a, (SELECT * FROM A) s -- from a\n;',
        },
    )
    assert compile_model("b", ms, targets(ms), {}, quote_ident) == (
        'SELECT * FROM "wh"."s"."a" JOIN "wh"."s"."a" AS q ON true, raw.a, (SELECT * FROM "wh"."s"."a") s'
    )


def test_self_reference_reads_its_own_target(tmp_path: Path) -> None:
    ms = model_set(tmp_path, {"events": "SELECT * FROM raw.e WHERE ts > (SELECT max(ts) FROM events)"})
    assert compile_model("events", ms, targets(ms, "staging"), {}, quote_ident) == (
        'SELECT * FROM raw.e WHERE ts > (SELECT max(ts) FROM "wh"."staging"."events")'
    )


def test_ephemeral_chain_is_inlined_in_dependency_order(tmp_path: Path) -> None:
    ms = model_set(
        tmp_path,
        {
            "base": "SELECT 1 AS x",
            "e1": "SELECT x FROM base WHERE x > {{ var('min', '0') }}",
            "e2": "SELECT x * 2 AS y FROM e1 -- doubled",
            "final": "SELECT y FROM e2 UNION ALL SELECT x FROM e1;",
        },
        ephemeral=("e1", "e2"),
    )
    assert compile_model("final", ms, targets(ms), {"min": "-1"}, quote_ident) == (
        'WITH "e1" AS (SELECT x FROM "wh"."s"."base" WHERE x > -1), '
        '"e2" AS (SELECT x * 2 AS y FROM "e1") '
        'SELECT y FROM "e2" UNION ALL SELECT x FROM "e1"'
    )


def test_ephemeral_joins_an_existing_with_after_comments(tmp_path: Path) -> None:
    ms = model_set(
        tmp_path,
        {
            "e": "SELECT 1 AS x",
            "m": "-- header\n/* more */\nwith recursive r AS (SELECT * FROM e) SELECT * FROM r",
        },
        ephemeral=("e",),
    )
    compiled = compile_model("m", ms, targets(ms), {}, quote_ident)
    assert compiled == (
        '-- header\n/* more */\nwith recursive "e" AS (SELECT 1 AS x), '
        'r AS (SELECT * FROM "e") SELECT * FROM r'
    )


def test_compiled_sql_runs_on_duckdb(tmp_path: Path) -> None:
    ms = model_set(
        tmp_path,
        {
            "e1": "SELECT range AS x FROM range(5) -- trailing",
            "e2": "WITH inner_cte AS (SELECT x FROM e1 WHERE x % 2 = 0) SELECT x FROM inner_cte;",
            "m": "-- comment first\nWITH w AS (SELECT x FROM e2) "
            "SELECT sum(w.x) AS s FROM w, e1 WHERE w.x = e1.x",
        },
        ephemeral=("e1", "e2"),
    )
    sql = compile_model("m", ms, targets(ms), {}, quote_ident)
    con = duckdb.connect()
    try:
        assert con.execute(sql).fetchall() == [(6,)]
        # and wrapped the way incremental / merge wrap it
        assert con.execute(f"SELECT * FROM ({sql}) AS src").fetchall() == [(6,)]
    finally:
        con.close()


def test_missing_variable_in_an_ephemeral_body(tmp_path: Path) -> None:
    ms = model_set(tmp_path, {"e": "SELECT {{ var('x') }} AS v", "m": "SELECT * FROM e"}, ephemeral=("e",))
    with pytest.raises(ModelError, match="model 'e' uses variable 'x' but no value was given"):
        compile_model("m", ms, targets(ms), {}, quote_ident)
