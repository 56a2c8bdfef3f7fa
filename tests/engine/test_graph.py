"""rocky_engine.graph: topological order, cycles and reachability (pure functions, no I/O)."""

from __future__ import annotations

from rocky_engine.graph import find_cycles, reachable, topological_order


def test_topological_order_puts_upstreams_first_with_an_alphabetical_tie_break() -> None:
    graph = {"mart": ["stg", "side"], "stg": ["raw"], "side": [], "raw": [], "b": [], "a": []}
    assert topological_order(graph) == ["a", "b", "raw", "side", "stg", "mart"]


def test_topological_order_ignores_unknown_and_repeated_upstreams() -> None:
    assert topological_order({"b": ["a", "a", "zz"], "a": []}) == ["a", "b"]


def test_topological_order_leaves_out_cycles_and_what_follows_them() -> None:
    graph = {"a": ["b"], "b": ["a"], "c": ["a"], "d": []}
    assert topological_order(graph) == ["d"]
    assert find_cycles(graph) == [["a", "b"]]


def test_reachable_follows_edges_transitively() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": []}
    assert reachable(["a"], lambda n: edges[n]) == {"a", "b", "c"}
    assert reachable(edges["d"], lambda n: edges[n]) == set()
