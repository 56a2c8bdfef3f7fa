"""Automation conditions for Rocky assets (the rule sits on the asset; no AutoMaterializePolicy)."""

from __future__ import annotations

from typing import Any

import dagster as dg


def rocky_eager_automation() -> dg.AutomationCondition[Any]:
    """``AutomationCondition.eager()``: materialize whenever an upstream updates, once upstream is done."""
    return dg.AutomationCondition.eager()


def rocky_cron_automation(cron_schedule: str, timezone: str = "UTC") -> dg.AutomationCondition[Any]:
    """``AutomationCondition.on_cron``: fire on the cron tick once every upstream updated since the last."""
    return dg.AutomationCondition.on_cron(cron_schedule, timezone)
