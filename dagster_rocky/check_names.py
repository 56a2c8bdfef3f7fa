"""The Dagster name of a Rocky check: one rule for the check specs and for the results that fill them.

Dagster names must match ``^[A-Za-z0-9_]+$``; Rocky's default assertion names are upstream's
``<kind>:<column>`` (``not_null:id``) and a sidecar may name a check anything. Every other character
becomes ``_``, so ``not_null:id`` is ``not_null_id`` in Dagster (as it was before upstream's form).
The anomaly detector's check (engine kind ``anomaly``) is ``row_count_anomaly``.
"""

from __future__ import annotations

import re

#: the name of the anomaly detector's check (the engine's kind ``anomaly``)
ANOMALY_CHECK = "row_count_anomaly"

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def dagster_check_name(name: str, kind: str | None = None) -> str:
    """The Dagster check name of the engine's check ``name`` of ``kind``."""
    if kind == "anomaly":
        return ANOMALY_CHECK
    return _INVALID.sub("_", name) or "check"
