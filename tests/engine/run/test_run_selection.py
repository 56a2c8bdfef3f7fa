"""``rocky run --model`` selectors: repeated names, ``+NAME`` (with upstream), ``NAME+`` (with downstream),
exactly the selected models in one invocation and in DAG order; unknown names refused before anything runs.

Runs in process through the real CLI (``rocky_in_process``) on a real DuckDB file.
"""

from __future__ import annotations

import json

import pytest

from tests.engine.run.conftest import WarehouseProject
from tests.fixtures.inprocess import rocky_in_process


@pytest.fixture
def chain(wp: WarehouseProject) -> WarehouseProject:
    """a -> b -> c, a -> d, and e alone (a bare table name is a dependency)."""
    wp.model("a", "SELECT 1 AS id")
    wp.model("b", "SELECT * FROM a")
    wp.model("c", "SELECT * FROM b")
    wp.model("d", "SELECT * FROM a")
    wp.model("e", "SELECT 5 AS id")
    assert wp.run().tables_copied == 5  # every table exists: a selection may leave its upstream out
    return wp


def built(wp: WarehouseProject, *selectors: str) -> list[str]:
    """The models one ``rocky run`` built, in the order it finished them (one at a time: DAG order)."""
    argv = ["-c", str(wp.config), "run", "--parallel", "1", "-o", "json"]
    for selector in selectors:
        argv += ["--model", selector]
    result = rocky_in_process(argv)
    assert result.returncode == 0, result.stderr
    return [m["asset_key"][-1] for m in json.loads(result.stdout)["materializations"]]


def test_repeated_model_flags_run_exactly_those_models_in_dag_order(chain: WarehouseProject) -> None:
    assert built(chain, "e", "c", "a") == ["a", "c", "e"]
    assert len(chain.runs()) == 2  # the first full run, then one run for the whole selection


def test_plus_prefix_adds_every_upstream_model(chain: WarehouseProject) -> None:
    assert built(chain, "+c") == ["a", "b", "c"]


def test_plus_suffix_adds_every_downstream_model(chain: WarehouseProject) -> None:
    assert built(chain, "b+") == ["b", "c"]
    assert built(chain, "a+") == ["a", "b", "c", "d"]
    assert built(chain, "+b+", "e") == ["a", "b", "c", "e"]


def test_ephemeral_models_are_inlined_in_an_expansion(chain: WarehouseProject) -> None:
    chain.model("eph", "SELECT * FROM a", '[strategy]\ntype = "ephemeral"\n')
    chain.model("f", "SELECT * FROM eph")
    assert built(chain, "+f") == ["a", "f"]  # eph is selected but never materialized


def test_an_unknown_selector_is_one_line_and_runs_nothing(chain: WarehouseProject) -> None:
    result = rocky_in_process(["-c", str(chain.config), "run", "--model", "a", "--model", "+cc"])
    assert result.returncode == 1 and result.stdout == ""
    assert result.error_lines == [
        "error: --model 'cc' is not a model of pipeline 'models'; did you mean 'c'?"]
    assert result.stderr.count("\n") == 1
    assert len(chain.runs()) == 1  # nothing ran: only the fixture's full run is recorded
    empty = rocky_in_process(["-c", str(chain.config), "run", "--model", "+"])
    assert empty.returncode == 1
    assert empty.error_lines == ["error: --model '+' names no model; write NAME, +NAME (with its upstream) "
                                 "or NAME+ (with its downstream)"]


def test_run_help_documents_the_selectors() -> None:
    result = rocky_in_process(["run", "--help"])
    text = " ".join(result.stdout.split())
    assert "--model SELECTOR" in text and "+NAME adds its upstream models" in text
    assert "NAME+ its downstream ones" in text and "in DAG order in this one process" in text
