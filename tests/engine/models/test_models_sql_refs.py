"""Finding bare table references in model SQL, rendering ``{{ var() }}``, stripping statement ends."""

from __future__ import annotations

import pytest

from rocky_engine.errors import ModelError
from rocky_engine.models.sql_refs import find_table_refs, render_vars, strip_trailing_semicolon


def names(sql: str) -> list[str]:
    return [ref.name for ref in find_table_refs(sql)]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM a", ["a"]),
        ("select * from a join b on a.id = b.id left join c using (id)", ["a", "b", "c"]),
        ("SELECT * FROM a, b, c WHERE a.x = b.x", ["a", "b", "c"]),
        ("SELECT * FROM a AS x, b y", ["a", "b"]),
        ("SELECT * FROM a JOIN b ON a.id = b.id, c", ["a", "b", "c"]),
        ("SELECT * FROM a AS t(c1, c2), b", ["a", "b"]),
        ("FROM a SELECT x", ["a"]),  # DuckDB's FROM-first syntax
        ("SELECT * FROM a ASOF JOIN b USING (ts)", ["a", "b"]),
        ("SELECT * FROM a POSITIONAL JOIN b", ["a", "b"]),
        ("SELECT * FROM a UNION ALL SELECT * FROM b", ["a", "b"]),
        ("SELECT * FROM a\nWHERE x IN (1, 2)\nORDER BY x, y", ["a"]),
        ("SELECT * FROM a GROUP BY x, y HAVING count(*) > 1", ["a"]),
        ("PIVOT a ON status USING sum(amount)", ["a"]),
        ("SELECT * FROM (UNPIVOT a ON jan, feb INTO NAME month VALUE v) u JOIN b ON true", ["a", "b"]),
    ],
)
def test_from_join_and_comma_lists(sql: str, expected: list[str]) -> None:
    assert names(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM (SELECT * FROM a) sub", ["a"]),
        # the outer comma list goes on after a subquery closes
        ("SELECT * FROM (SELECT * FROM a) x, b", ["a", "b"]),
        ("SELECT * FROM a WHERE id IN (SELECT id FROM b)", ["a", "b"]),
        ("SELECT (SELECT max(x) FROM b) AS m, y FROM a", ["b", "a"]),
        ("SELECT * FROM a WHERE EXISTS (SELECT 1 FROM b, c WHERE b.x = a.x)", ["a", "b", "c"]),
        ("SELECT * FROM ((SELECT * FROM a)) s, b", ["a", "b"]),
        ("SELECT * FROM a, LATERAL (SELECT * FROM b WHERE b.x = a.x) l", ["a", "b"]),
    ],
)
def test_subqueries(sql: str, expected: list[str]) -> None:
    assert names(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT extract(year FROM created_at) AS y FROM a",
        "SELECT trim(BOTH ' ' FROM created_at) FROM a",
        "SELECT substring(created_at FROM 2 FOR 3) FROM a",
    ],
)
def test_function_from_is_not_a_table_position(sql: str) -> None:
    # a column that happens to be named like a model must not become a dependency
    assert names(sql) == ["a"]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("WITH a AS (SELECT * FROM b) SELECT * FROM a", ["b"]),
        ("with recursive a as (select 1 union all select * from a) select * from a, c", ["c"]),
        ("WITH x(id) AS (SELECT * FROM b) SELECT * FROM x", ["b"]),
        ("WITH x AS MATERIALIZED (SELECT 1), y AS NOT MATERIALIZED (SELECT 2) SELECT * FROM x, y, z", ["z"]),
        ('WITH "Q" AS (SELECT * FROM b) SELECT * FROM q', ["b"]),
        ("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b JOIN c ON true", ["c"]),
    ],
)
def test_cte_names_shadow_models(sql: str, expected: list[str]) -> None:
    assert names(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM raw.a",
        "SELECT * FROM wh.raw.a",
        "SELECT * FROM raw . a",
        'SELECT * FROM "raw"."a"',
        'SELECT * FROM raw."a"',
        "SELECT * FROM x.y JOIN wh.s.t ON true",
    ],
)
def test_qualified_names_are_ignored(sql: str) -> None:
    assert names(sql) == []


def test_qualified_and_bare_mixed() -> None:
    assert names("SELECT * FROM raw.orders o JOIN customers c ON c.id = o.cid, payments") == [
        "customers",
        "payments",
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'FROM a' AS s",
        "SELECT 'it''s FROM a' AS s",
        "SELECT 1 -- FROM a\n",
        "SELECT 1 /* FROM a, b\n JOIN c */",
        'SELECT "from" AS x',
    ],
)
def test_strings_and_comments_are_ignored(sql: str) -> None:
    assert names(sql) == []


def test_comment_between_from_and_table() -> None:
    assert names("SELECT * FROM /* the orders */ a -- trailing\nJOIN\n-- x\nb ON true") == ["a", "b"]


def test_quoted_identifiers_count_and_are_unquoted() -> None:
    sql = 'SELECT * FROM "a" JOIN "We""ird" ON true'
    refs = find_table_refs(sql)
    assert [r.name for r in refs] == ["a", 'We"ird']
    # the span covers the quotes, so a rewrite replaces the whole identifier
    assert [sql[r.start : r.end] for r in refs] == ['"a"', '"We""ird"']


def test_quoted_keyword_does_not_start_a_from_list() -> None:
    assert names('SELECT "from", b FROM a') == ["a"]


def test_table_functions_are_not_tables() -> None:
    assert names("SELECT * FROM range(10) r, read_parquet('x.parquet') p, a") == ["a"]
    assert names("SELECT * FROM a, unnest([1, 2]) u") == ["a"]


def test_spans_point_at_the_identifier() -> None:
    sql = "SELECT *\nFROM   orders o\nJOIN Customers c ON true"
    refs = find_table_refs(sql)
    assert [(r.name, sql[r.start : r.end]) for r in refs] == [
        ("orders", "orders"),
        ("Customers", "Customers"),
    ]


def test_var_placeholders_are_not_references() -> None:
    assert names("SELECT * FROM a WHERE d >= '{{ var('start') }}' AND x = {{ var('n', '1') }}") == ["a"]


def test_scanner_is_linear_on_large_sql() -> None:
    # 20,000 references in one statement: a quadratic scanner would take minutes
    sql = "SELECT * FROM " + ", ".join(f"t{i}" for i in range(20_000))
    assert len(find_table_refs(sql)) == 20_000


# ---------------------------------------------------------------------- render_vars


def test_render_vars_with_values_and_defaults() -> None:
    sql = "SELECT * FROM a WHERE d >= '{{ var('start') }}' AND n < {{var('limit', '10')}}"
    assert render_vars(sql, {"start": "2026-01-01"}, model="m") == (
        "SELECT * FROM a WHERE d >= '2026-01-01' AND n < 10"
    )
    assert render_vars(sql, {"start": "x", "limit": "5"}, model="m").endswith("n < 5")


def test_render_vars_accepts_double_quotes() -> None:
    sql = """SELECT {{ var("a") }} AS a, '{{ var("b", "it's") }}' AS b"""
    assert render_vars(sql, {"a": "1"}, model="m") == "SELECT 1 AS a, 'it's' AS b"


def test_other_template_calls_are_refused_with_a_hint() -> None:
    with pytest.raises(ModelError) as info:
        render_vars("SELECT * FROM {{ ref('stg_orders') }}", {}, model="fct")
    assert str(info.value) == (
        "model 'fct' uses the template expression {{ ref('stg_orders') }}, which rocky does not render; "
        "only {{ var('name') }} is rendered; reference other models by their bare table name"
    )


def test_braces_that_are_not_template_calls_pass_through() -> None:
    sql = "SELECT '{{ just text }}' AS a, '{\"k\": {\"v\": 1}}' AS j"
    assert render_vars(sql, {}, model="m") == sql


def test_render_vars_without_placeholders_is_identity() -> None:
    assert render_vars("SELECT 1", {}, model="m") == "SELECT 1"


def test_render_vars_missing_value_names_model_and_variable() -> None:
    with pytest.raises(ModelError) as info:
        render_vars("SELECT {{ var('start_date') }}", {}, model="stg_orders")
    assert str(info.value) == (
        "model 'stg_orders' uses variable 'start_date' but no value was given; "
        "pass --var start_date=<value> or write {{ var('start_date', '<default>') }}"
    )


# ---------------------------------------------------------------------- strip_trailing_semicolon


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1;", "SELECT 1"),
        ("  SELECT 1 ;; \n", "SELECT 1"),
        ("SELECT 1 -- trailing comment", "SELECT 1"),
        ("SELECT 1; -- done\n", "SELECT 1"),
        ("SELECT 1\n-- a note on its own line\n", "SELECT 1"),
        ("SELECT 1\n/* closing block */", "SELECT 1"),
        ("SELECT 1 /* a */ ; /* b */", "SELECT 1"),
        ("SELECT ';' AS s", "SELECT ';' AS s"),
        ("SELECT 1 -- a\n, 2", "SELECT 1 -- a\n, 2"),
    ],
)
def test_strip_trailing_semicolon(sql: str, expected: str) -> None:
    assert strip_trailing_semicolon(sql) == expected
