"""The state store: one SQLite file per project holding watermarks, run history, progress, check history,
idempotency keys, connector state and the scheduler's local tables.

Open it with ``StateStore.open(project.state_path())`` (the rule: ``state.location``); repositories hang
off the store (``store.watermarks``, ``store.runs``, ``store.progress``, ``store.idempotency``,
``store.checks``).

Names are resolved lazily (PEP 562): a command that needs only the store does not pay for importing every
repository and its pydantic models at start-up (``rocky tick`` and ``rocky run`` both start often).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.state.check_history import CheckRecord
    from rocky_engine.state.idempotency_decision import ClaimDecision
    from rocky_engine.state.location import state_file
    from rocky_engine.state.progress import ProgressEntry
    from rocky_engine.state.runs import ModelExecution, RunRecord, format_run_id, trigger_from_env
    from rocky_engine.state.schema import LOCAL_ONLY_TABLES, SCHEMA_VERSION
    from rocky_engine.state.store import StateStore, lock_path_of
    from rocky_engine.state.watermarks import Watermark

_HOMES = {
    "CheckRecord": "check_history",
    "ClaimDecision": "idempotency_decision",
    "state_file": "location",
    "ProgressEntry": "progress",
    "ModelExecution": "runs",
    "RunRecord": "runs",
    "format_run_id": "runs",
    "trigger_from_env": "runs",
    "LOCAL_ONLY_TABLES": "schema",
    "SCHEMA_VERSION": "schema",
    "StateStore": "store",
    "lock_path_of": "store",
    "Watermark": "watermarks",
}

__all__ = [
    "LOCAL_ONLY_TABLES",
    "SCHEMA_VERSION",
    "CheckRecord",
    "ClaimDecision",
    "ModelExecution",
    "ProgressEntry",
    "RunRecord",
    "StateStore",
    "Watermark",
    "format_run_id",
    "lock_path_of",
    "state_file",
    "trigger_from_env",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rocky_engine.state' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rocky_engine.state.{home}"), name)
    globals()[name] = value
    return value
