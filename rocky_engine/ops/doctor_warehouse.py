"""``rocky doctor`` checks that reach the warehouse: ``adapters`` (reachable) and ``auth`` (credentials).

A DuckDB file is opened read-only, so doctor never takes the writer's lock from a run; a file held by a
running writer is a Warning (it is in use, not broken). PostgreSQL is connected to and asked ``SELECT 1``
(adapters) or ``SELECT current_user`` (auth). A Fivetran discovery adapter is checked by ``auth`` with one
authenticated ``GET /v1/destinations/<id>``. Messages never carry a password, key or DSN.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.errors import AdapterError
from rocky_engine.ops.doctor import Finding, Status, worst

if TYPE_CHECKING:
    from rocky_engine.config import FivetranAdapterConfig, RockyConfig

_FIVETRAN_TIMEOUT_S = 10.0


def check_adapters(config: RockyConfig) -> Finding:
    """Every warehouse adapter can be reached; Critical when one cannot."""
    if not config.adapters:
        return Finding("critical", "no adapters are defined", ("add an [adapter.<name>] table",))
    results: list[tuple[Status, str]] = []
    suggestions: list[str] = []
    for name, adapter in config.adapters.items():
        if adapter.type == "duckdb":
            status, message = _duckdb_reachable(name, adapter.resolved_path(config.root))
        elif adapter.type == "postgres":
            status, message = _postgres_query(config, name, "SELECT 1", "reachable")
        else:
            status, message = "healthy", f"{name}: {adapter.type} discovery adapter (credentials: see auth)"
        results.append((status, message))
        if status == "critical":
            suggestions.append(f"check [adapter.{name}] and that the warehouse is up")
    return _combine(results, suggestions)


def check_auth(config: RockyConfig) -> Finding:
    """The credentials of every adapter that has some are accepted."""
    results: list[tuple[Status, str]] = []
    suggestions: list[str] = []
    for name, adapter in config.adapters.items():
        if adapter.type == "postgres":
            status, message = _postgres_query(config, name, "SELECT current_user", "authenticated as")
        elif adapter.type == "fivetran":
            status, message = _fivetran_auth(name, adapter)
        else:
            continue
        results.append((status, message))
        if status == "critical":
            suggestions.append(f"check the credentials of [adapter.{name}] (a rotated key or password?)")
    if not results:
        return Finding("healthy", "no adapter needs credentials (embedded DuckDB only)")
    return _combine(results, suggestions)


def _combine(results: list[tuple[Status, str]], suggestions: list[str]) -> Finding:
    return Finding(worst([s for s, _ in results]), "; ".join(m for _, m in results), tuple(suggestions))


def _duckdb_reachable(name: str, path: Path | None) -> tuple[Status, str]:
    if path is None:
        return "healthy", f"{name}: in-memory DuckDB"
    if not path.exists():
        parent = path.parent
        if parent.is_dir() and os.access(parent, os.W_OK):
            return "healthy", f"{name}: {path} does not exist yet; the first run creates it"
        return "critical", f"{name}: {path} does not exist and {parent} is not a writable directory"
    import duckdb

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        text = str(exc)
        if "lock" in text.lower():
            return "warning", f"{name}: {path} is locked by another process (a run in progress?)"
        return "critical", f"{name}: cannot open {path}: {text.splitlines()[0] if text else exc}"
    try:
        con.execute("SELECT 1").fetchall()
    except duckdb.Error as exc:
        return "critical", f"{name}: {path} opened but cannot be queried: {exc}"
    finally:
        con.close()
    return "healthy", f"{name}: {path} opens (DuckDB)"


def _postgres_query(config: RockyConfig, name: str, sql: str, ok_label: str) -> tuple[Status, str]:
    try:
        from rocky_engine.adapters import open_adapter

        adapter = open_adapter(config, name, retry=False)  # a health check reports, it does not retry
    except ImportError:
        return "critical", f"{name}: the PostgreSQL driver is not installed (pip install 'rocky[postgres]')"
    except AdapterError as exc:
        return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
    try:
        rows = adapter.query(sql)
    except AdapterError as exc:
        return "critical", f"{name}: {exc.message} ({exc.failure_kind})"
    finally:
        adapter.close()
    detail = f" {rows[0][0]}" if ok_label == "authenticated as" and rows else ""
    return "healthy", f"{name}: {ok_label}{detail} (PostgreSQL)"


def _fivetran_auth(name: str, cfg: FivetranAdapterConfig) -> tuple[Status, str]:
    import httpx

    url = f"{cfg.base_url.rstrip('/')}/v1/destinations/{cfg.destination_id}"
    auth = (cfg.api_key.get_secret_value(), cfg.api_secret.get_secret_value())
    try:
        response = httpx.get(url, auth=auth, timeout=_FIVETRAN_TIMEOUT_S,
                             headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        return "critical", f"{name}: Fivetran API unreachable ({type(exc).__name__})"
    if response.status_code in (401, 403):
        return "critical", f"{name}: Fivetran rejected the API key/secret (HTTP {response.status_code})"
    if response.status_code == 404:
        return "critical", f"{name}: Fivetran destination '{cfg.destination_id}' not found (HTTP 404)"
    if response.status_code >= 400:
        return "critical", f"{name}: Fivetran API answered HTTP {response.status_code}"
    return "healthy", f"{name}: Fivetran credentials accepted"
