"""Small graph algorithms shared by the model DAG, the schedule plan and config validation.

A graph is a mapping from each node to the nodes it depends on (its upstreams). Edges to names that are
not nodes of the graph are ignored: callers report unknown names themselves, with their own message.
Results are deterministic (sorted), so two runs over the same project always say the same thing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping


def topological_order(upstreams: Mapping[str, Iterable[str]]) -> list[str]:
    """Every node after all of its upstreams, alphabetical among the ready (Kahn's algorithm, a heap).

    Nodes on a cycle, or downstream of one, are left out: an order shorter than the graph means a cycle
    (:func:`find_cycles` names it).
    """
    downstream: dict[str, list[str]] = {node: [] for node in upstreams}
    pending = dict.fromkeys(upstreams, 0)
    for node, ups in upstreams.items():
        for up in set(ups):
            if up in downstream:
                downstream[up].append(node)
                pending[node] += 1
    ready = [node for node, count in pending.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for nxt in downstream[node]:
            pending[nxt] -= 1
            if pending[nxt] == 0:
                heapq.heappush(ready, nxt)
    return order


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Each strongly connected component that forms a cycle (sorted members), in sorted order (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.append(top)
                if top == node:
                    break
            if len(members) > 1 or node in graph.get(node, ()):
                cycles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def reachable(start: Iterable[str], edges: Callable[[str], Iterable[str]]) -> set[str]:
    """Every node reached from ``start`` by following ``edges`` (``start`` itself included)."""
    seen: set[str] = set()
    stack = list(start)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges(node))
    return seen
