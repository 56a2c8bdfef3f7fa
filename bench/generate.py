"""Emit the benchmark DAG three ways from the same SQL bodies: a Rocky project, a dbt project, raw SQL.

Layout written under `out_dir`:

    seed.sql            creates raw_orders / raw_customers / raw_products / raw_payments (run before timing)
    raw.sql             topologically ordered `CREATE OR REPLACE TABLE main.<name> AS <body>;` statements
    plan.json           the same statements with their names and levels (read by raw_runner.py)
    rocky/rocky.toml    DuckDB adapter + one transformation pipeline `bench`
    rocky/models/*.sql  one SELECT per model, bare table names
    dbt/                dbt_project.yml, profiles.yml (path from env BENCH_DUCKDB_PATH), models/*.sql

Usage: python bench/generate.py OUT_DIR --models 100 --order-rows 100000 [--seed 7] [--only rocky]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dag import DagBuilder, Model

PLACEHOLDER = re.compile(r"@@([ms]):([A-Za-z0-9_]+)@@")
RAW_TABLES = ("raw_customers", "raw_products", "raw_orders", "raw_payments")
DB_FILE = "warehouse.duckdb"
ALL_TARGETS = ("rocky", "dbt", "raw")


@dataclass(frozen=True)
class GeneratedProject:
    """Paths and facts of one generated benchmark project."""

    root: Path
    n_models: int
    order_rows: int
    seed: int
    model_names: tuple[str, ...]
    seed_sql: Path
    raw_sql: Path
    plan_json: Path
    rocky_dir: Path
    dbt_dir: Path

    @property
    def rocky_toml(self) -> Path:
        return self.rocky_dir / "rocky.toml"


def render_bare(body: str) -> str:
    """Rocky and raw form: every model and source is a bare table name."""
    return PLACEHOLDER.sub(lambda mt: mt.group(2), body)


def render_dbt(body: str) -> str:
    """dbt form: models through ref(), raw tables through source('raw', ...)."""

    def sub(mt: re.Match[str]) -> str:
        kind, name = mt.group(1), mt.group(2)
        return f"{{{{ ref('{name}') }}}}" if kind == "m" else f"{{{{ source('raw', '{name}') }}}}"

    return PLACEHOLDER.sub(sub, body)


def seed_sql(order_rows: int) -> str:
    """Deterministic raw data built from arithmetic on range() (no random(): identical on every run)."""
    customers = max(100, order_rows // 20)
    products = 200
    payments = order_rows * 6 // 5
    return f"""\
CREATE OR REPLACE TABLE main.raw_customers AS
SELECT
    i AS customer_id,
    'customer_' || i AS name,
    CASE WHEN i % 11 = 0 THEN NULL ELSE ['bronze', 'silver', 'gold'][1 + (i * 7) % 3] END AS tier,
    ['north', 'south', 'east', 'west', 'central'][1 + (i * 3) % 5] AS region,
    TIMESTAMP '2014-01-01 00:00:00' + ((i * 37) % 3650) * INTERVAL 1 DAY AS signup_ts
FROM range(1, {customers + 1}) AS t(i);

CREATE OR REPLACE TABLE main.raw_products AS
SELECT
    i AS product_id,
    ['Books', 'Games', 'Garden', 'Kitchen', 'Music', 'Sports', 'Tools', 'Toys'][1 + (i * 5) % 8] AS category,
    CAST(round(((i * 7919) % 10000) / 100.0, 2) AS VARCHAR) AS price
FROM range(1, {products + 1}) AS t(i);

CREATE OR REPLACE TABLE main.raw_orders AS
SELECT
    i AS order_id,
    1 + (i * 7919) % {customers} AS customer_id,
    1 + (i * 31) % {products} AS product_id,
    TIMESTAMP '2023-01-01 00:00:00' + ((i * 13) % 730) * INTERVAL 1 DAY
        + ((i * 97) % 86400) * INTERVAL 1 SECOND AS order_ts,
    [' placed', 'shipped', 'completed ', 'returned', 'cancelled', 'completed'][1 + (i * 17) % 6] AS status,
    CAST(round(((i * 7907) % 50000) / 100.0, 2) AS VARCHAR) AS amount,
    1 + (i * 3) % 7 AS quantity
FROM range(1, {order_rows + 1}) AS t(i);

CREATE OR REPLACE TABLE main.raw_payments AS
SELECT
    i AS payment_id,
    1 + (i * 7) % {order_rows} AS order_id,
    ['card', 'bank', 'wallet', 'voucher', 'crypto'][1 + (i * 13) % 5] AS method,
    CAST(round(((i * 6007) % 40000) / 100.0, 2) AS VARCHAR) AS amount,
    TIMESTAMP '2023-01-02 00:00:00' + ((i * 11) % 730) * INTERVAL 1 DAY AS paid_ts
FROM range(1, {payments + 1}) AS t(i);
"""


def _ordered(models: list[Model]) -> list[Model]:
    """Topological order: by level (longest path from the sources), then by name."""
    return sorted(models, key=lambda x: (x.level, x.name))


def _write_rocky(root: Path, models: list[Model]) -> None:
    (root / "models").mkdir(parents=True)
    (root / "rocky.toml").write_text(
        "[adapter]\n"
        'type = "duckdb"\n'
        f'path = "{DB_FILE}"\n\n'
        "[pipeline.bench]\n"
        'type = "transformation"\n'
        'models = "models/**"\n'
    )
    for x in models:
        (root / "models" / f"{x.name}.sql").write_text(render_bare(x.body))


def _write_dbt(root: Path, models: list[Model]) -> None:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(
        "name: bench\n"
        "version: '1.0.0'\n"
        "config-version: 2\n"
        "profile: bench\n"
        "model-paths: ['models']\n"
        "models:\n"
        "  bench:\n"
        "    +materialized: table\n"
    )
    (root / "profiles.yml").write_text(
        "bench:\n"
        "  target: dev\n"
        "  outputs:\n"
        "    dev:\n"
        "      type: duckdb\n"
        f"      path: \"{{{{ env_var('BENCH_DUCKDB_PATH', '{DB_FILE}') }}}}\"\n"
        "      schema: main\n"
        "      threads: 4\n"
    )
    tables = "".join(f"      - name: {t}\n" for t in RAW_TABLES)
    (root / "models" / "sources.yml").write_text(
        f"version: 2\nsources:\n  - name: raw\n    schema: main\n    tables:\n{tables}"
    )
    for x in models:
        (root / "models" / f"{x.name}.sql").write_text(render_dbt(x.body))


def generate(out_dir: Path | str, n_models: int, order_rows: int, seed: int = 7,
             targets: tuple[str, ...] = ALL_TARGETS) -> GeneratedProject:
    """Write the project for `n_models` models over `order_rows` orders into `out_dir` (replaced)."""
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    models = _ordered(DagBuilder(n_models, seed).build())
    project = GeneratedProject(
        root=out, n_models=len(models), order_rows=order_rows, seed=seed,
        model_names=tuple(x.name for x in models),
        seed_sql=out / "seed.sql", raw_sql=out / "raw.sql", plan_json=out / "plan.json",
        rocky_dir=out / "rocky", dbt_dir=out / "dbt",
    )
    project.seed_sql.write_text(seed_sql(order_rows))
    if "raw" in targets:
        statements = [
            {"name": x.name, "level": x.level,
             "sql": f"CREATE OR REPLACE TABLE main.{x.name} AS\n{render_bare(x.body)}"}
            for x in models
        ]
        project.raw_sql.write_text(
            "".join(f"-- {st['name']} (level {st['level']})\n{st['sql']};\n\n" for st in statements)
        )
        project.plan_json.write_text(json.dumps({"statements": statements}, indent=1))
    if "rocky" in targets:
        _write_rocky(project.rocky_dir, models)
    if "dbt" in targets:
        _write_dbt(project.dbt_dir, models)
    return project


def main(argv: list[str] | None = None) -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("out_dir")
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--order-rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=ALL_TARGETS, action="append", help="emit only these targets")
    args = parser.parse_args(argv)
    project = generate(args.out_dir, args.models, args.order_rows, args.seed,
                       tuple(args.only) if args.only else ALL_TARGETS)
    print(f"generated {project.n_models} models in {project.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
