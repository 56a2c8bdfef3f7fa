"""The example's translator (``translator_class`` in ``defs/replication/defs.yaml``): when models refresh.

Every model comes from ``rocky dag``; only the automation is a choice of this code location. Staging and
intermediate models refresh eagerly when their inputs update; the marts wait for a daily cron tick after
their inputs updated.
"""

from typing import Any

import dagster as dg

from dagster_rocky import RockyDagsterTranslator, rocky_cron_automation, rocky_eager_automation
from dagster_rocky.types import DagNode


class ExampleTranslator(RockyDagsterTranslator):
    def get_dag_node_automation_condition(self, node: DagNode) -> dg.AutomationCondition[Any] | None:
        if node.target is not None and node.target.schema_ == "marts":
            return rocky_cron_automation("0 7 * * *", "UTC")
        return rocky_eager_automation()
