"""A fixed-time schedule for the replication assets (tagged ``layer=raw`` by the component's translation)."""

import dagster as dg

from dagster_rocky import build_rocky_schedule

daily_replication = build_rocky_schedule(
    name="daily_replication",
    cron_schedule="0 6 * * *",
    target=dg.AssetSelection.tag("layer", "raw"),
    timezone="UTC",
    description="Replicate the playground's raw__* schemas every morning at 06:00 UTC.",
)
