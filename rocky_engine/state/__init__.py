"""The state store: one SQLite file per project holding watermarks, run history, progress, check history,
idempotency keys, connector state and the scheduler's local tables.

Open it with ``StateStore.open(project_state_path(...))``; repositories hang off the store
(``store.watermarks``, ``store.runs``, ``store.progress``, ``store.idempotency``, ``store.checks``).
"""

from __future__ import annotations

from rocky_engine.state.check_history import CheckRecord
from rocky_engine.state.idempotency import ClaimDecision
from rocky_engine.state.location import project_state_path, resolve_state_path
from rocky_engine.state.progress import ProgressEntry
from rocky_engine.state.runs import ModelExecution, RunRecord, format_run_id, trigger_from_env
from rocky_engine.state.schema import LOCAL_ONLY_TABLES, SCHEMA_VERSION
from rocky_engine.state.store import StateStore, lock_path_of
from rocky_engine.state.watermarks import Watermark

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
    "project_state_path",
    "resolve_state_path",
    "trigger_from_env",
]
