"""``rocky doctor`` checks that reach the warehouse: ``adapters`` (reachable) and ``auth`` (credentials).

Each adapter type answers for itself (``AdapterPlugin.reachable`` / ``authenticated``): a DuckDB file is
opened read-only so doctor never takes a run's lock, a PostgreSQL server is asked ``SELECT 1`` /
``SELECT current_user``, a Fivetran key is tried with one authenticated GET. Messages never carry a
password, key or DSN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.ops.doctor_finding import Finding, Status, worst

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig


def check_adapters(config: RockyConfig) -> Finding:
    """Every warehouse adapter can be reached; Critical when one cannot."""
    from rocky_engine.adapters.registry import plugin

    if not config.adapters:
        return Finding("critical", "no adapters are defined", ("add an [adapter.<name>] table",))
    results: list[tuple[Status, str]] = []
    suggestions: list[str] = []
    for name, adapter in config.adapters.items():
        status, message = plugin(adapter.type).reachable(config, name)
        results.append((status, message))
        if status == "critical":
            suggestions.append(f"check [adapter.{name}] and that the warehouse is up")
    return _combine(results, suggestions)


def check_auth(config: RockyConfig) -> Finding:
    """The credentials of every adapter that has some are accepted."""
    from rocky_engine.adapters.registry import plugin

    results: list[tuple[Status, str]] = []
    suggestions: list[str] = []
    for name, adapter in config.adapters.items():
        found = plugin(adapter.type).authenticated(config, name)
        if found is None:
            continue
        status, message = found
        results.append((status, message))
        if status == "critical":
            suggestions.append(f"check the credentials of [adapter.{name}] (a rotated key or password?)")
    if not results:
        return Finding("healthy", "no adapter needs credentials (embedded DuckDB only)")
    return _combine(results, suggestions)


def _combine(results: list[tuple[Status, str]], suggestions: list[str]) -> Finding:
    return Finding(worst([s for s, _ in results]), "; ".join(m for _, m in results), tuple(suggestions))
