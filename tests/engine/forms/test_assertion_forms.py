"""Upstream assertion forms on a quality pipeline (issue 15 part B): ``aggregate`` with ``value = "0"``,
``composite`` with ``kind = "unique"``, and check names of the form ``unique:customer_id``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocky_engine.config.checks import Assertion
from rocky_engine.state.store import StateStore
from tests.engine.forms.kit import doc, rocky
from tests.fixtures.projects import DuckDBProject


def _quality(root: Path, assertions: str) -> DuckDBProject:
    project = DuckDBProject(root)
    project.sql(
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.orders (id INTEGER, customer_id INTEGER, region VARCHAR, amount INTEGER)",
        "INSERT INTO shop.orders VALUES (1, 10, 'eu', 5), (2, 10, 'us', 0), (3, 11, 'eu', 7), "
        "(4, 11, 'eu', 1)",
    )
    project.write_config(f"""\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.dq]
type = "quality"

[[pipeline.dq.tables]]
catalog = "wh"
schema = "shop"
table = "orders"

[pipeline.dq.checks]
{assertions}
""")
    return project


def _checks(result: Any) -> dict[str, dict[str, Any]]:
    [table] = doc(result)["check_results"]
    return {c["name"]: c for c in table["checks"]}


def test_aggregate_value_as_a_string_number(tmp_path: Path) -> None:
    project = _quality(tmp_path, """
[[pipeline.dq.checks.assertions]]
table = "orders"
type = "aggregate"
op = "min"
column = "amount"
cmp = "gte"
value = "0"
name = "no_negative_amounts"

[[pipeline.dq.checks.assertions]]
table = "orders"
type = "aggregate"
op = "sum"
column = "amount"
cmp = "lt"
value = "12.5"
name = "small_total"
""")
    result = rocky(project, "run", "--pipeline", "dq")
    checks = _checks(result)
    assert checks["no_negative_amounts"]["passed"] is True
    assert checks["no_negative_amounts"]["value"] == 0  # a number in the document, not "0"
    assert checks["small_total"]["passed"] is False and checks["small_total"]["actual"] == 13
    assert result.returncode == 1


def test_aggregate_value_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    project = _quality(tmp_path, """
[[pipeline.dq.checks.assertions]]
table = "orders"
type = "aggregate"
op = "count"
cmp = "gt"
value = "zero"
""")
    result = rocky(project, "run", "--pipeline", "dq")
    assert result.returncode == 1
    [line] = result.error_lines
    assert "pipeline.dq.checks.assertions[0].value" in line and "expected a number" in line, line


def test_composite_kind_unique_and_synthesized_names(tmp_path: Path) -> None:
    project = _quality(tmp_path, """
[[pipeline.dq.checks.assertions]]
table = "orders"
type = "composite"
kind = "unique"
columns = ["customer_id", "region"]
name = "one_order_per_customer_region"

[[pipeline.dq.checks.assertions]]
table = "orders"
type = "unique"
column = "customer_id"
severity = "warning"

[[pipeline.dq.checks.assertions]]
table = "orders"
type = "not_null"
column = "id"
""")
    result = rocky(project, "run", "--pipeline", "dq")
    checks = _checks(result)
    assert set(checks) == {"one_order_per_customer_region", "unique:customer_id", "not_null:id"}
    assert checks["one_order_per_customer_region"]["failing_rows"] == 2  # (11, 'eu') twice
    assert checks["unique:customer_id"]["failing_rows"] == 4
    assert result.returncode == 1
    with StateStore.open(project.root / ".rocky-state.db", writer=False) as store:
        names = {r.check_name for r in store.checks.for_run(doc(result)["run_id"])}
    assert "unique:customer_id" in names


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('type = "composite"\nkind = "not_null_any"\ncolumns = ["id"]', "kind"),
        ('type = "unique"\nkind = "unique"\ncolumn = "id"',
         "'kind' applies to assertion type 'composite' only"),
    ],
)
def test_composite_kind_other_than_unique_is_refused(tmp_path: Path, extra: str, message: str) -> None:
    project = _quality(tmp_path, f'[[pipeline.dq.checks.assertions]]\ntable = "orders"\n{extra}\n')
    result = rocky(project, "run", "--pipeline", "dq")
    assert result.returncode == 1
    [line] = result.error_lines
    assert "pipeline.dq.checks.assertions[0]" in line and message in line, line


def test_range_bounds_as_string_numbers(tmp_path: Path) -> None:
    project = _quality(tmp_path, """
[[pipeline.dq.checks.assertions]]
table = "orders"
type = "in_range"
column = "amount"
min = "0"
max = "6"

[[pipeline.dq.checks.assertions]]
table = "orders"
type = "row_count_range"
min = "1"
max = "10"
""")
    result = rocky(project, "run", "--pipeline", "dq")
    checks = _checks(result)
    assert checks["in_range:amount"]["failing_rows"] == 1  # the 7
    assert checks["row_count_range"]["passed"] is True and checks["row_count_range"]["max"] == 10


def test_a_text_bound_stays_text() -> None:
    dated = Assertion.model_validate(
        {"table": "t", "type": "in_range", "column": "d", "min": "2024-01-01", "max": " 5 "}
    )
    assert (dated.min, dated.max) == ("2024-01-01", 5)
