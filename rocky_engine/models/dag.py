"""The model DAG: edges from ``depends_on`` and bare table names, topological order, cycles.

Order is topological with an alphabetical tie-break (CONTRACT section 2), so two runs of the same project
always list models the same way.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from rocky_engine.errors import CircularDependencyError, UnknownDependencyError
from rocky_engine.graph import reachable, topological_order
from rocky_engine.models.model import Model
from rocky_engine.models.sql_refs import TableRef, find_table_refs


@dataclass
class ModelSet:
    """Every model of a pipeline, with edges and a deterministic execution order."""

    models: dict[str, Model]
    order: list[str]
    dependents: dict[str, list[str]]
    refs: dict[str, list[TableRef]] = field(default_factory=dict)  # bare refs that are model names
    #: per model, the dotted names it reads (``schema.table``, ``catalog.schema.table``): not models
    tables: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.models)

    def downstream(self, name: str) -> set[str]:
        """Every model that depends on ``name`` directly or transitively."""
        return reachable(self.dependents.get(name, ()), lambda cur: self.dependents.get(cur, ()))

    def built_upstream(self, name: str) -> list[str]:
        """Direct dependencies of ``name`` with ephemeral models (inlined, never built) replaced by
        their own dependencies: the models that must be built before ``name`` can run."""
        result: set[str] = set()
        stack = list(self.models[name].depends_on)
        seen: set[str] = set()
        while stack:
            dep = stack.pop()
            if dep in seen:
                continue
            seen.add(dep)
            if self.models[dep].strategy.type == "ephemeral":
                stack.extend(self.models[dep].depends_on)
            else:
                result.add(dep)
        return sorted(result)

    def upstream(self, name: str) -> set[str]:
        """Every model ``name`` depends on directly or transitively."""
        return reachable(self.models[name].depends_on, lambda cur: self.models[cur].depends_on)


def build_model_set(models: dict[str, Model]) -> ModelSet:
    """Resolve edges and order.

    Raises:
        UnknownDependencyError: an explicit ``depends_on`` names no model.
        CircularDependencyError: the edges form a cycle.
    """
    lower_names = {name.lower(): name for name in models}
    refs: dict[str, list[TableRef]] = {}
    tables: dict[str, list[tuple[str, ...]]] = {}
    for name in sorted(models):
        model = models[name]
        deps: set[str] = set()
        for dep in model.explicit_deps:
            if dep not in models:
                close = difflib.get_close_matches(dep, list(models), n=1)
                raise UnknownDependencyError(dep, name, close[0] if close else None)
            deps.add(dep)
        dotted: list[tuple[str, ...]] = []
        model_refs = [r for r in find_table_refs(model.sql, dotted) if r.name.lower() in lower_names]
        if dotted:
            tables[name] = dotted
        for ref in model_refs:
            target = lower_names[ref.name.lower()]
            if target != name:
                deps.add(target)
        if model_refs:
            refs[name] = model_refs
        model.depends_on = sorted(deps)
    dependents: dict[str, list[str]] = {name: [] for name in models}
    for name, model in models.items():
        for dep in model.depends_on:
            dependents[dep].append(name)
    for children in dependents.values():
        children.sort()
    order = topological_order({name: model.depends_on for name, model in models.items()})
    if len(order) != len(models):
        raise CircularDependencyError(_cycle_members(models, set(models).difference(order)))
    return ModelSet(models=models, order=order, dependents=dependents, refs=refs, tables=tables)


def _cycle_members(models: dict[str, Model], remaining: set[str]) -> list[str]:
    """The models on one cycle among those Kahn's algorithm could not order, in cycle order."""
    start = min(remaining)
    path: list[str] = []
    position: dict[str, int] = {}
    node = start
    while node not in position:
        position[node] = len(path)
        path.append(node)
        node = min(d for d in models[node].depends_on if d in remaining)
    return sorted(path[position[node] :])
