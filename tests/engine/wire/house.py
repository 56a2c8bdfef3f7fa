"""A project that makes every command print every kind of document: each pipeline type, every check kind,
schedules, hooks that keep the event contexts they receive, a load directory; on a real DuckDB file.

Every command runs as a real ``rocky`` subprocess with ``--output json`` and one ``--state-path`` (the
store's default location is another room's business; here it must simply be the same for every command).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fixtures.projects import Cli, DuckDBProject

CONFIG = """\
[adapter]
type = "duckdb"
path = "wh.duckdb"

[pipeline.raw]
type = "replication"
strategy = "incremental"
timestamp_column = "ts"

[pipeline.raw.source.schema_pattern]
prefix = "src"
separator = "__"
components = ["source"]

[pipeline.raw.target]
catalog_template = "wh"
schema_template = "stg__{source}"

[pipeline.raw.schedule]
cron = "*/5 * * * *"

[pipeline.raw.checks]
row_count = true
column_match = true
freshness = { threshold_seconds = 60, severity = "warning" }
null_rate = { columns = ["email"], threshold = 0.5, severity = "warning" }
custom = [
  { name = "no_negative", sql = "SELECT count(*) FROM {target} WHERE amount < 0", severity = "warning" },
  { name = "nothing_to_sum", sql = "SELECT max(amount) FROM {target} WHERE 1 = 0", severity = "warning" },
]
ASSERTIONS

[pipeline.models]
type = "transformation"
models = "models/good/**"

[pipeline.models.checks]
row_count = true

[pipeline.models.schedule]
after = ["raw"]

[pipeline.partial]
type = "transformation"
models = "models/partial/**"

[pipeline.broken]
type = "transformation"
models = "models/broken/**"

[pipeline.broken.schedule]
after = ["raw"]

[pipeline.dq]
type = "quality"

[[pipeline.dq.tables]]
catalog = "wh"
schema = "stg__shop"
table = "orders"

[[pipeline.dq.checks.assertions]]
table = "orders"
type = "accepted_values"
column = "status"
values = ["paid"]

[pipeline.snap]
type = "snapshot"
unique_key = ["id"]
updated_at = "ts"

[pipeline.snap.source]
catalog = "wh"
schema = "src__shop"
table = "customers"

[pipeline.snap.target]
catalog = "wh"
schema = "snapshots"
table = "customers_history"

[pipeline.files]
type = "load"
source_dir = "data"

[pipeline.files.target]
catalog = "wh"
schema = "landing"

[[hook.on_pipeline_complete]]
command = "cat >> hooks.jsonl"

[[hook.on_check_result]]
command = "cat >> hooks.jsonl"
env = { HOOK_TOKEN = "not-listed" }
"""

#: one assertion of every type on the replicated orders table (all pass on the seeded data)
ASSERTIONS = [
    {"type": "not_null", "column": "id"},
    {"type": "unique", "column": "id"},
    {"type": "accepted_values", "column": "status", "values": ["paid", "open"]},
    {"type": "relationships", "column": "customer_id", "to_table": "customers", "to_column": "id"},
    {"type": "expression", "expression": "amount >= 0"},
    {"type": "row_count_range", "min": 1, "max": 1000},
    {"type": "in_range", "column": "amount", "min": 0, "max": 1000},
    {"type": "regex_match", "column": "status", "pattern": "^[a-z]+$"},
    {"type": "aggregate", "op": "sum", "column": "amount", "cmp": ">=", "value": 0},
    {"type": "composite", "columns": ["id", "status"]},
    {"type": "not_in_future", "column": "ts"},
    {"type": "older_than_n_days", "column": "ts", "days": 36500, "filter": "id > 0"},
]


def _assertions_toml() -> str:
    blocks = []
    for a in ASSERTIONS:
        lines = ["[[pipeline.raw.checks.assertions]]", 'table = "orders"']
        lines += [f"{k} = {json.dumps(v)}" for k, v in a.items()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@dataclass
class House(DuckDBProject):
    """The project; :meth:`rocky` runs one command against it."""

    @property
    def state_path(self) -> Path:
        return self.root / "state.db"

    def build(self) -> House:
        self.config.write_text(CONFIG.replace("ASSERTIONS", _assertions_toml()))
        self.sql(
            "CREATE SCHEMA src__shop",
            "CREATE TABLE src__shop.customers AS SELECT range AS id, 'c' || range AS name, "
            "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range(1, 6)",
            "CREATE TABLE src__shop.orders AS SELECT range AS id, 1 + range % 5 AS customer_id, "
            "CASE WHEN range % 2 = 0 THEN 'paid' ELSE 'open' END AS status, range * 1.5 AS amount, "
            "CASE WHEN range % 3 = 0 THEN NULL ELSE 'o' || range || '@example.com' END AS email, "
            "TIMESTAMP '2026-01-01' + to_seconds(range) AS ts FROM range(1, 21)",
        )
        models = self.root / "models"
        self._model(models / "good", "order_totals",
                    "SELECT status, sum(amount) AS total FROM stg__shop.orders GROUP BY status")
        self._model(models / "partial", "fine", "SELECT 1 AS x")
        self._model(models / "partial", "bad", "SELECT no_such_column FROM stg__shop.orders")
        self._model(models / "broken", "worse", "SELECT * FROM stg__shop.no_such_table")
        data = self.root / "data"
        data.mkdir()
        (data / "people.csv").write_text("id,name\n1,ada\n2,bob\n")
        (data / "broken.parquet").write_text("not parquet")
        return self

    def _model(self, directory: Path, name: str, sql: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}.sql").write_text(textwrap.dedent(sql) + "\n")

    def rocky(self, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Cli:
        """``rocky -c rocky.toml --state-path state.db <args> --output json``."""
        return self.cli("--state-path", str(self.state_path), *args, "--output", "json", env=env,
                        timeout=timeout)

    def hook_contexts(self) -> list[dict[str, Any]]:
        """Every event context the command hooks received on stdin, in order."""
        path = self.root / "hooks.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
