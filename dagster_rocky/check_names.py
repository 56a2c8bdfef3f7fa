"""The Dagster name of a Rocky check: one rule for the check specs and for the results that fill them.

Dagster names must match ``^[A-Za-z0-9_]+$``; Rocky's default assertion names are upstream's
``<kind>:<column>`` (``not_null:id``) and a sidecar may name a check anything. Every other character
becomes ``_``, so ``not_null:id`` is ``not_null_id`` in Dagster (as it was before upstream's form).
The anomaly detector's check (engine kind ``anomaly``) is ``row_count_anomaly``. The rule lives in the
wire module because the engine's Pipes reporter names its check results by it too.
"""

from __future__ import annotations

from rocky_engine.wire.metadata import ANOMALY_CHECK, dagster_check_name

__all__ = ["ANOMALY_CHECK", "dagster_check_name"]
