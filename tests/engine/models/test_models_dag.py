"""The model DAG: edges from depends_on and SQL references, order, cycles, unknown dependencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.errors import CircularDependencyError, ModelError, UnknownDependencyError
from rocky_engine.models import ModelSet, load_models


def project(tmp_path: Path, models: dict[str, str], sidecars: dict[str, str] | None = None) -> ModelSet:
    base = tmp_path / "models"
    base.mkdir(parents=True, exist_ok=True)
    for name, sql in models.items():
        (base / f"{name}.sql").write_text(sql)
    for name, toml in (sidecars or {}).items():
        (base / f"{name}.toml").write_text(toml)
    return load_models("models/**", tmp_path, {})


def test_edges_from_sql_references_and_depends_on(tmp_path: Path) -> None:
    ms = project(
        tmp_path,
        {
            "raw_copy": "SELECT * FROM raw.orders",
            "stg": "SELECT * FROM raw_copy",
            "side": "SELECT 1 AS x",
            "mart": "SELECT * FROM stg s JOIN STG t ON true",  # case-insensitive, deduplicated
        },
        {"mart": 'depends_on = ["side"]\n'},
    )
    assert ms.models["raw_copy"].depends_on == []
    assert ms.models["stg"].depends_on == ["raw_copy"]
    assert ms.models["mart"].depends_on == ["side", "stg"]
    assert ms.dependents == {"raw_copy": ["stg"], "stg": ["mart"], "side": ["mart"], "mart": []}
    assert ms.downstream("raw_copy") == {"stg", "mart"}
    assert ms.upstream("mart") == {"side", "stg", "raw_copy"}
    assert [r.name for r in ms.refs["mart"]] == ["stg", "STG"]
    assert "side" not in ms.refs


def test_self_reference_is_not_an_edge(tmp_path: Path) -> None:
    # an incremental model may read its own target to find its high-water mark
    ms = project(tmp_path, {"events": "SELECT * FROM src WHERE ts > (SELECT max(ts) FROM events)"})
    assert ms.models["events"].depends_on == []
    assert ms.order == ["events"]


def test_names_that_are_not_models_are_not_edges(tmp_path: Path) -> None:
    ms = project(tmp_path, {"a": "SELECT * FROM some_source_table", "b": "SELECT * FROM main.a"})
    assert ms.models["a"].depends_on == [] and ms.models["b"].depends_on == []


def test_cte_named_like_a_model_shadows_it(tmp_path: Path) -> None:
    ms = project(tmp_path, {"a": "SELECT 1 AS x", "b": "WITH a AS (SELECT 2 AS x) SELECT * FROM a"})
    assert ms.models["b"].depends_on == []


def test_topological_order_with_alphabetical_tie_break(tmp_path: Path) -> None:
    ms = project(
        tmp_path,
        {
            "zeta": "SELECT 1",
            "alpha": "SELECT 1",
            "mid": "SELECT * FROM zeta",
            "beta": "SELECT * FROM mid, alpha",
            "omega": "SELECT * FROM alpha",
        },
    )
    # ready set at each step, smallest name first: alpha, zeta -> omega, mid (zeta done) ...
    assert ms.order == ["alpha", "omega", "zeta", "mid", "beta"]


def test_order_is_independent_of_file_system_order(tmp_path: Path) -> None:
    a = project(tmp_path / "one", {"c": "SELECT 1", "b": "SELECT 1", "a": "SELECT * FROM c"})
    b = project(tmp_path / "two", {"a": "SELECT * FROM c", "b": "SELECT 1", "c": "SELECT 1"})
    assert a.order == b.order == ["b", "c", "a"]


def test_two_model_cycle(tmp_path: Path) -> None:
    with pytest.raises(CircularDependencyError) as info:
        project(tmp_path, {"a": "SELECT * FROM b", "b": "SELECT * FROM a"})
    assert str(info.value) == (
        "circular dependency detected involving: ['a', 'b']; "
        "remove one of the depends_on edges or table references that form the cycle"
    )
    assert info.value.members == ["a", "b"]


def test_cycle_reports_only_the_cycle_members(tmp_path: Path) -> None:
    # root -> x -> y -> z -> x, and tail hangs below the cycle: neither root nor tail is on it
    with pytest.raises(CircularDependencyError) as info:
        project(
            tmp_path,
            {
                "root": "SELECT 1",
                "x": "SELECT * FROM root, z",
                "y": "SELECT * FROM x",
                "z": "SELECT * FROM y",
                "tail": "SELECT * FROM z",
                "aaa_tail": "SELECT * FROM tail",
            },
        )
    assert info.value.members == ["x", "y", "z"]
    assert str(info.value).startswith("circular dependency detected involving: ['x', 'y', 'z'];")


def test_cycle_through_depends_on(tmp_path: Path) -> None:
    with pytest.raises(CircularDependencyError) as info:
        project(tmp_path, {"a": "SELECT 1", "b": "SELECT * FROM a"}, {"a": 'depends_on = ["b"]\n'})
    assert info.value.members == ["a", "b"]


def test_explicit_self_dependency_is_a_cycle(tmp_path: Path) -> None:
    with pytest.raises(CircularDependencyError) as info:
        project(tmp_path, {"a": "SELECT 1"}, {"a": 'depends_on = ["a"]\n'})
    assert str(info.value).startswith("circular dependency detected involving: ['a'];")


def test_unknown_dependency_with_suggestion(tmp_path: Path) -> None:
    with pytest.raises(UnknownDependencyError) as info:
        project(
            tmp_path,
            {"stg_orders": "SELECT 1", "fct": "SELECT 1"},
            {"fct": 'depends_on = ["stg_order"]\n'},
        )
    assert str(info.value) == (
        "unknown dependency 'stg_order' referenced by 'fct' (did you mean 'stg_orders'?)"
    )
    assert isinstance(info.value, ModelError)


def test_unknown_dependency_without_suggestion(tmp_path: Path) -> None:
    with pytest.raises(UnknownDependencyError) as info:
        project(tmp_path, {"a": "SELECT 1"}, {"a": 'depends_on = ["completely_different"]\n'})
    assert str(info.value) == "unknown dependency 'completely_different' referenced by 'a'"


@pytest.mark.slow
def test_ten_thousand_models_load_correctly(tmp_path: Path) -> None:
    """A generated 10,000-model project: every edge found, order topological. Correctness only."""
    base = tmp_path / "models"
    for layer in range(4):
        (base / f"layer{layer}").mkdir(parents=True)
    expected_deps: dict[str, list[str]] = {}
    for i in range(10_000):
        name = f"m{i:05d}"
        parents = sorted({f"m{j:05d}" for j in (i - 1, i // 2, i - 97) if 0 <= j < i})
        expected_deps[name] = parents
        sql = "SELECT 1 AS x" + "".join(f"\nUNION ALL SELECT x FROM {p}" for p in parents)
        sql += "\nUNION ALL SELECT x FROM raw.source_table -- FROM m99999"
        (base / f"layer{i % 4}" / f"{name}.sql").write_text(sql)
    (base / "layer3" / "m00003.toml").write_text('[strategy]\ntype = "view"\n')
    ms = load_models("models/**", tmp_path, {})
    assert len(ms) == 10_000
    assert {n: m.depends_on for n, m in ms.models.items()} == expected_deps
    position = {name: i for i, name in enumerate(ms.order)}
    assert len(position) == 10_000
    for name, parents in expected_deps.items():
        for parent in parents:
            assert position[parent] < position[name]
    assert ms.order[:3] == ["m00000", "m00001", "m00002"]
    assert ms.models["m00003"].strategy.type == "view"
