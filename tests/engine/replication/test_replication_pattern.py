"""Schema-pattern parsing, routing templates, asset keys and ``--filter`` parsing."""

from __future__ import annotations

import re

import pytest

from rocky_engine.config.schema_pattern import (
    Misfit,
    ParsedSchema,
    SchemaPattern,
    asset_key,
    render_template,
)
from rocky_engine.errors import ConfigError, UsageError
from rocky_engine.replication.filter import ReplicationFilter


def test_fixed_components_parse() -> None:
    pattern = SchemaPattern.build("src", "__", ["tenant", "region"])
    parsed = pattern.parse("src__acme__us_west")
    assert parsed == ParsedSchema("src__acme__us_west", {"tenant": "acme", "region": "us_west"})
    assert pattern.describe() == "src__<tenant>__<region>"


def test_schema_without_prefix_is_not_a_source() -> None:
    pattern = SchemaPattern.build("src", "__", ["source"])
    assert pattern.parse("main") is None
    assert pattern.parse("srcx__a") is None
    assert pattern.parse("staging__orders") is None


def test_prefix_may_carry_its_separator() -> None:
    assert SchemaPattern.build("raw__", "__", ["source"]).parse("raw__orders") == ParsedSchema(
        "raw__orders", {"source": "orders"}
    )


def test_variadic_last_component_takes_one_or_more_parts() -> None:
    pattern = SchemaPattern.build("src", "__", ["tenant", "regions..."])
    one = ParsedSchema("src__acme__eu", {"tenant": "acme", "regions": ["eu"]})
    assert pattern.parse("src__acme__eu") == one
    assert pattern.parse("src__acme__us__west__2") == ParsedSchema(
        "src__acme__us__west__2", {"tenant": "acme", "regions": ["us", "west", "2"]}
    )
    assert pattern.describe() == "src__<tenant>__<regions>..."


def test_misfits_name_the_schema_and_the_pattern() -> None:
    pattern = SchemaPattern.build("src", "__", ["tenant", "region"])
    too_many = pattern.parse("src__acme__us__west")
    assert too_many == Misfit(
        "src__acme__us__west",
        "schema 'src__acme__us__west' does not match the pattern src__<tenant>__<region> (expected 2 "
        "components after 'src__', found 3); skipped",
    )
    too_few = pattern.parse("src__acme")
    assert isinstance(too_few, Misfit) and "found 1" in too_few.reason
    bare = pattern.parse("src")
    assert isinstance(bare, Misfit) and "found 0" in bare.reason
    empty = pattern.parse("src__acme____x")
    assert isinstance(empty, Misfit)


def test_variadic_misfit_says_at_least() -> None:
    pattern = SchemaPattern.build("src", "__", ["tenant", "regions..."])
    misfit = pattern.parse("src__acme")
    assert isinstance(misfit, Misfit)
    assert "expected at least 2 components" in misfit.reason


def test_empty_prefix_makes_every_schema_a_candidate() -> None:
    pattern = SchemaPattern.build("", "_", ["source"])
    assert pattern.parse("orders") == ParsedSchema("orders", {"source": "orders"})
    assert isinstance(pattern.parse("a_b"), Misfit)


@pytest.mark.parametrize(
    ("components", "message"),
    [
        (["a...", "b"], "only the last component can be variadic ('a...' is not last)"),
        ([], "components must name at least one component"),
        (["a", "a"], "component 'a' is named twice"),
        (["a-b"], "component name 'a-b' is not an identifier"),
    ],
)
def test_bad_patterns_are_config_errors(components: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        SchemaPattern.build("src", "__", components)


def test_render_template_joins_variadic_with_target_separator() -> None:
    comps = {"tenant": "acme", "regions": ["us", "west"]}
    assert render_template("wh_{tenant}", comps, "_") == "wh_acme"
    assert render_template("stg__{tenant}__{regions}", comps, "__") == "stg__acme__us__west"
    assert render_template("x_{regions}", comps, "-") == "x_us-west"


def test_render_template_unknown_placeholder() -> None:
    with pytest.raises(ConfigError, match=r"\{nope\} is not a source schema_pattern component; components: "
                       r"tenant"):
        render_template("stg_{nope}", {"tenant": "a"}, "__", key="target.schema_template")


def test_asset_key_flattens_variadic_with_double_underscore() -> None:
    assert asset_key("duckdb", {"tenant": "acme", "regions": ["us", "west"]}, "orders") == [
        "duckdb", "acme", "us__west", "orders"
    ]


# --------------------------------------------------------------------------- --filter


def test_filter_keys() -> None:
    comps = ["tenant", "regions"]
    f = ReplicationFilter.parse("id=src__acme__eu", comps)
    assert f.matches_source("src__acme__eu", {}) and not f.matches_source("src__x", {})
    t = ReplicationFilter.parse("table=orders", comps)
    assert t.matches_source("anything", {}) and t.matches_table("orders") and not t.matches_table("x")
    c = ReplicationFilter.parse("tenant=acme", comps)
    assert c.matches_source("s", {"tenant": "acme"}) and not c.matches_source("s", {"tenant": "globex"})
    v = ReplicationFilter.parse("regions=west", comps)
    assert v.matches_source("s", {"regions": ["us", "west"]})
    assert not v.matches_source("s", {"regions": ["eu"]})
    assert str(v) == "regions=west"


def test_filter_without_equals_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as exc:
        ReplicationFilter.parse("orders", ["source"])
    assert str(exc.value) == (
        "--filter 'orders' must be key=value (id=, table=, or a component: source=); "
        "e.g. --filter id=raw__orders or --filter table=orders"
    )


def test_filter_unknown_key_lists_valid_keys() -> None:
    with pytest.raises(UsageError) as exc:
        ReplicationFilter.parse("tenant=acme", ["source"])
    assert str(exc.value) == (
        "--filter key 'tenant' is not id, table or a schema_pattern component; valid keys: "
        "id=, table=, or a component: source="
    )


def test_filter_empty_value() -> None:
    with pytest.raises(UsageError, match="has no value after '='"):
        ReplicationFilter.parse("id=", ["source"])
