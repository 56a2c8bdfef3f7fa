"""The benchmark DAG: a deterministic layered set of SQL models over four raw tables.

Bodies are written once with placeholders (`@@m:name@@` for a model, `@@s:table@@` for a raw source table)
and rendered per target by `generate.py`: bare names for Rocky and the raw statement list, `ref()` /
`source()` for dbt. Every model reads only from earlier tiers, so the graph is acyclic by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Output-column families: a template consumes models of given families and produces one family.
ORD, CUS, PAY, PRD = "orders", "customers", "payments", "products"
ENR, AGG, CST = "enriched", "daily_agg", "customer_stats"
MRT_D, MRT_C, MRT_O, MET = "mart_daily", "mart_customer", "mart_order", "metric"

DIMS = {
    "region": "region",
    "tier": "tier",
    "category": "category",
    "region_category": "region || '/' || category",
    # Fine-grained keys make some aggregates (and the marts over them) tens of thousands of rows.
    "customer": "CAST(customer_id AS VARCHAR)",
    "product": "CAST(product_id AS VARCHAR)",
}
GRAINS = ("day", "week", "month")


@dataclass
class Model:
    """One generated model: its name, tier, output family, dependencies and placeholder body."""

    name: str
    tier: int
    family: str
    body: str
    deps: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    dim: str = ""
    level: int = 0


def m(name: str) -> str:
    """Placeholder for a reference to another model."""
    return f"@@m:{name}@@"


def s(table: str) -> str:
    """Placeholder for a reference to a raw source table."""
    return f"@@s:{table}@@"


class DagBuilder:
    """Builds the model list tier by tier from a seeded RNG."""

    def __init__(self, n_models: int, seed: int) -> None:
        self.n = n_models
        self.rng = random.Random(seed)
        self.models: list[Model] = []
        self.by_family: dict[str, list[Model]] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _add(self, prefix: str, tier: int, family: str, body: str, deps: list[Model],
             sources: list[str] | None = None, dim: str = "") -> Model:
        name = f"{prefix}_{len(self.models) + 1:05d}"
        model = Model(name, tier, family, body, [d.name for d in deps], sources or [], dim)
        model.level = 0 if not deps else 1 + max(d.level for d in deps)
        self.models.append(model)
        self.by_family.setdefault(family, []).append(model)
        return model

    def _pick(self, family: str, tier: int, dim: str | None = None) -> Model:
        """A model of `family` from a tier below `tier`, biased towards recent ones (realistic fan-in)."""
        pool = [x for x in self.by_family[family] if x.tier < tier and (dim is None or x.dim == dim)]
        if not pool:
            pool = [x for x in self.by_family[family] if x.tier < tier]
        # Triangular bias: later models (deeper in the graph) are picked more often.
        idx = int(len(pool) * (1.0 - self.rng.random() ** 1.6))
        return pool[min(idx, len(pool) - 1)]

    # -- staging ---------------------------------------------------------------------------------
    def _stg_orders(self) -> None:
        r = self.rng
        min_amount = r.choice((0, 1, 5, 10, 20))
        mod, rem = r.choice((7, 11, 13, 17)), r.randrange(7)
        body = (
            "SELECT\n"
            "    CAST(order_id AS BIGINT) AS order_id,\n"
            "    CAST(customer_id AS BIGINT) AS customer_id,\n"
            "    CAST(product_id AS BIGINT) AS product_id,\n"
            "    CAST(order_ts AS DATE) AS order_date,\n"
            "    lower(trim(status)) AS status,\n"
            "    CAST(amount AS DECIMAL(12, 2)) AS amount,\n"
            "    CAST(quantity AS INTEGER) AS quantity\n"
            f"FROM {s('raw_orders')}\n"
            f"WHERE status <> 'cancelled'\n"
            f"  AND CAST(amount AS DECIMAL(12, 2)) >= {min_amount}\n"
            f"  AND order_id % {mod} <> {rem}\n"
        )
        self._add("stg_orders", 0, ORD, body, [], ["raw_orders"])

    def _stg_customers(self) -> None:
        year = self.rng.choice((2014, 2015, 2016, 2017))
        body = (
            "SELECT\n"
            "    CAST(customer_id AS BIGINT) AS customer_id,\n"
            "    upper(region) AS region,\n"
            "    coalesce(tier, 'none') AS tier,\n"
            "    CAST(signup_ts AS DATE) AS signup_date\n"
            f"FROM {s('raw_customers')}\n"
            f"WHERE signup_ts >= TIMESTAMP '{year}-01-01 00:00:00'\n"
        )
        self._add("stg_customers", 0, CUS, body, [], ["raw_customers"])

    def _stg_payments(self) -> None:
        methods = sorted(self.rng.sample(["card", "bank", "wallet", "voucher", "crypto"], 3))
        listed = ", ".join(f"'{x}'" for x in methods)
        body = (
            "SELECT\n"
            "    CAST(payment_id AS BIGINT) AS payment_id,\n"
            "    CAST(order_id AS BIGINT) AS order_id,\n"
            "    method,\n"
            "    CAST(amount AS DECIMAL(12, 2)) AS amount,\n"
            "    CAST(paid_ts AS DATE) AS paid_date\n"
            f"FROM {s('raw_payments')}\n"
            f"WHERE method IN ({listed})\n"
        )
        self._add("stg_payments", 0, PAY, body, [], ["raw_payments"])

    def _stg_products(self) -> None:
        floor = self.rng.choice((0, 5, 10, 25))
        body = (
            "SELECT\n"
            "    CAST(product_id AS BIGINT) AS product_id,\n"
            "    lower(category) AS category,\n"
            "    CAST(price AS DECIMAL(10, 2)) AS price\n"
            f"FROM {s('raw_products')}\n"
            f"WHERE CAST(price AS DECIMAL(10, 2)) >= {floor}\n"
        )
        self._add("stg_products", 0, PRD, body, [], ["raw_products"])

    # -- intermediate ----------------------------------------------------------------------------
    def _int_enrich(self, tier: int) -> None:
        o, c = self._pick(ORD, tier), self._pick(CUS, tier)
        p, pay = self._pick(PRD, tier), self._pick(PAY, tier)
        body = (
            "SELECT\n"
            "    o.order_id, o.customer_id, o.product_id, o.order_date, c.region, c.tier, p.category,\n"
            "    o.amount, o.quantity, coalesce(pay.paid_amount, 0) AS paid_amount\n"
            f"FROM {m(o.name)} AS o\n"
            f"JOIN {m(c.name)} AS c ON c.customer_id = o.customer_id\n"
            f"JOIN {m(p.name)} AS p ON p.product_id = o.product_id\n"
            "LEFT JOIN (\n"
            f"    SELECT order_id, sum(amount) AS paid_amount FROM {m(pay.name)} GROUP BY order_id\n"
            ") AS pay ON pay.order_id = o.order_id\n"
        )
        self._add("int_enriched", tier, ENR, body, [o, c, p, pay])

    def _int_refine(self, tier: int) -> None:
        e = self._pick(ENR, tier)
        factor = self.rng.choice(("1.05", "0.95", "1.10", "1.00"))
        region = self.rng.choice(("NORTH", "SOUTH", "EAST", "WEST", "CENTRAL"))
        body = (
            "SELECT\n"
            "    order_id, customer_id, product_id, order_date, region, tier, category,\n"
            f"    CAST(amount * {factor} AS DECIMAL(12, 2)) AS amount, quantity, paid_amount\n"
            f"FROM {m(e.name)}\n"
            f"WHERE region <> '{region}' AND paid_amount >= 0\n"
        )
        self._add("int_refined", tier, ENR, body, [e])

    def _int_daily_agg(self, tier: int) -> None:
        e = self._pick(ENR, tier)
        dim = self.rng.choice(sorted(DIMS))
        grain = self.rng.choice(GRAINS)
        date_expr = "order_date" if grain == "day" else f"CAST(date_trunc('{grain}', order_date) AS DATE)"
        body = (
            "SELECT\n"
            f"    {DIMS[dim]} AS dim_key,\n"
            f"    {date_expr} AS order_date,\n"
            "    count(*) AS order_count,\n"
            "    sum(amount) AS revenue,\n"
            "    sum(quantity) AS units\n"
            f"FROM {m(e.name)}\n"
            "GROUP BY 1, 2\n"
        )
        self._add("int_agg", tier, AGG, body, [e], dim=dim)

    def _int_agg_join(self, tier: int) -> None:
        a = self._pick(AGG, tier)
        b = self._pick(AGG, tier, dim=a.dim)
        body = (
            "SELECT\n"
            "    a.dim_key, a.order_date,\n"
            "    a.order_count + coalesce(b.order_count, 0) AS order_count,\n"
            "    a.revenue + coalesce(b.revenue, 0) AS revenue,\n"
            "    a.units + coalesce(b.units, 0) AS units\n"
            f"FROM {m(a.name)} AS a\n"
            "LEFT JOIN (\n"
            "    SELECT dim_key, order_date, sum(order_count) AS order_count, sum(revenue) AS revenue,\n"
            f"        sum(units) AS units FROM {m(b.name)} GROUP BY 1, 2\n"
            ") AS b ON b.dim_key = a.dim_key AND b.order_date = a.order_date\n"
        )
        self._add("int_agg_join", tier, AGG, body, [a, b] if a is not b else [a], dim=a.dim)

    def _int_rollup(self, tier: int) -> None:
        a = self._pick(AGG, tier)
        body = (
            "SELECT\n"
            "    dim_key, CAST(date_trunc('month', order_date) AS DATE) AS order_date,\n"
            "    sum(order_count) AS order_count, sum(revenue) AS revenue, sum(units) AS units\n"
            f"FROM {m(a.name)}\n"
            "GROUP BY 1, 2\n"
        )
        self._add("int_rollup", tier, AGG, body, [a], dim=a.dim)

    def _int_customer_stats(self, tier: int) -> None:
        e, c = self._pick(ENR, tier), self._pick(CUS, tier)
        body = (
            "SELECT\n"
            "    s.customer_id, c.region, c.tier, s.order_count, s.revenue,\n"
            "    s.first_order_date, s.last_order_date\n"
            "FROM (\n"
            "    SELECT customer_id, count(*) AS order_count, sum(amount) AS revenue,\n"
            "        min(order_date) AS first_order_date, max(order_date) AS last_order_date\n"
            f"    FROM {m(e.name)}\n"
            "    GROUP BY customer_id\n"
            ") AS s\n"
            f"JOIN {m(c.name)} AS c ON c.customer_id = s.customer_id\n"
        )
        self._add("int_customer", tier, CST, body, [e, c])

    # -- marts -----------------------------------------------------------------------------------
    def _mart_daily(self, tier: int) -> None:
        a = self._pick(AGG, tier)
        window = self.rng.choice((3, 6, 13, 27))
        body = (
            "SELECT\n"
            "    dim_key, order_date, order_count, revenue,\n"
            "    sum(revenue) OVER (PARTITION BY dim_key ORDER BY order_date\n"
            f"        ROWS BETWEEN {window} PRECEDING AND CURRENT ROW) AS revenue_window,\n"
            "    lag(revenue) OVER (PARTITION BY dim_key ORDER BY order_date) AS revenue_prev,\n"
            "    rank() OVER (PARTITION BY order_date ORDER BY revenue DESC) AS revenue_rank,\n"
            "    revenue / nullif(sum(revenue) OVER (PARTITION BY order_date), 0) AS share_of_period\n"
            f"FROM {m(a.name)}\n"
        )
        self._add("mart_daily", tier, MRT_D, body, [a], dim=a.dim)

    def _mart_trend(self, tier: int) -> None:
        d = self._pick(MRT_D, tier)
        body = (
            "SELECT\n"
            "    dim_key, order_date, order_count, revenue,\n"
            "    avg(revenue_window) OVER (PARTITION BY dim_key ORDER BY order_date\n"
            "        ROWS BETWEEN 27 PRECEDING AND CURRENT ROW) AS revenue_window,\n"
            "    first_value(revenue) OVER (PARTITION BY dim_key ORDER BY order_date) AS revenue_prev,\n"
            "    dense_rank() OVER (PARTITION BY dim_key ORDER BY revenue DESC) AS revenue_rank,\n"
            "    share_of_period\n"
            f"FROM {m(d.name)}\n"
        )
        self._add("mart_trend", tier, MRT_D, body, [d], dim=d.dim)

    def _mart_customer(self, tier: int) -> None:
        c = self._pick(CST, tier)
        body = (
            "SELECT\n"
            "    customer_id, region, tier, order_count, revenue,\n"
            "    rank() OVER (PARTITION BY region ORDER BY revenue DESC, customer_id) AS revenue_rank,\n"
            "    percent_rank() OVER (ORDER BY revenue, customer_id) AS revenue_pct,\n"
            "    ntile(10) OVER (ORDER BY revenue, customer_id) AS decile,\n"
            "    last_order_date - first_order_date AS active_days\n"
            f"FROM {m(c.name)}\n"
        )
        self._add("mart_customer", tier, MRT_C, body, [c])

    def _mart_order(self, tier: int) -> None:
        e = self._pick(ENR, tier)
        body = (
            "SELECT\n"
            "    order_id, customer_id, order_date, region, amount,\n"
            "    row_number() OVER w AS order_seq,\n"
            "    sum(amount) OVER (w ROWS UNBOUNDED PRECEDING) AS cumulative_amount,\n"
            "    order_date - lag(order_date) OVER w AS days_since_prev\n"
            f"FROM {m(e.name)}\n"
            "WINDOW w AS (PARTITION BY customer_id ORDER BY order_date, order_id)\n"
        )
        self._add("mart_order", tier, MRT_O, body, [e])

    # -- metrics ---------------------------------------------------------------------------------
    _METRIC_SELECT = {
        MRT_D: ("SELECT '{label}' AS metric_name, dim_key, CAST(sum(revenue) AS DOUBLE) AS value "
                "FROM {ref} GROUP BY dim_key"),
        MRT_C: ("SELECT '{label}' AS metric_name, region AS dim_key, CAST(avg(revenue) AS DOUBLE) AS value "
                "FROM {ref} WHERE decile >= 9 GROUP BY region"),
        MRT_O: ("SELECT '{label}' AS metric_name, CAST(least(order_seq, 10) AS VARCHAR) AS dim_key, "
                "CAST(avg(amount) AS DOUBLE) AS value FROM {ref} GROUP BY 2"),
    }

    def _metric(self, tier: int) -> None:
        families = [f for f in (MRT_D, MRT_C, MRT_O) if self.by_family.get(f)]
        picked: list[Model] = []
        for _ in range(self.rng.choice((1, 2, 2, 3))):
            src = self._pick(self.rng.choice(families), tier)
            if src not in picked:
                picked.append(src)
        parts = [self._METRIC_SELECT[x.family].format(label=f"{x.family}_{i}", ref=m(x.name))
                 for i, x in enumerate(picked)]
        body = "\nUNION ALL\n".join(parts) + "\n"
        self._add("metric", tier, MET, body, picked)

    # -- assembly --------------------------------------------------------------------------------
    def build(self) -> list[Model]:
        """Generate the whole DAG: ~20% staging, ~40% intermediate, ~30% marts, ~10% metrics."""
        n = self.n
        n_stg = max(4, round(n * 0.2))
        n_met = max(1, round(n * 0.1))
        n_mart = max(3, round(n * 0.3))
        n_int = max(3, n - n_stg - n_met - n_mart)
        r = self.rng
        stg = [self._stg_orders, self._stg_customers, self._stg_payments, self._stg_products]
        for fn in stg:  # every source family at least once
            fn()
        for _ in range(n_stg - len(stg)):
            r.choices(stg, weights=(4, 2, 2, 1))[0]()
        # Intermediate: three tiers; the first only joins staging, later ones build on earlier ones.
        t1 = max(1, round(n_int * 0.35))
        t2 = max(1, round(n_int * 0.35))
        t3 = max(1, n_int - t1 - t2)
        self._int_enrich(1)
        for _ in range(t1 - 1):
            self._int_enrich(1)
        t2_ops = [self._int_refine, self._int_daily_agg, self._int_customer_stats, self._int_enrich]
        self._int_daily_agg(2)
        self._int_customer_stats(2)
        for _ in range(t2 - 2):
            r.choices(t2_ops, weights=(2, 4, 2, 1))[0](2)
        t3_ops = [self._int_daily_agg, self._int_agg_join, self._int_rollup, self._int_customer_stats,
                  self._int_refine]
        for _ in range(t3):
            r.choices(t3_ops, weights=(3, 3, 2, 1, 1))[0](3)
        # Marts in two tiers (the second may build trends on the first), then metrics.
        m1 = max(3, round(n_mart * 0.7))
        self._mart_daily(4)
        self._mart_customer(4)
        self._mart_order(4)
        mart_ops = [self._mart_daily, self._mart_customer, self._mart_order]
        for _ in range(m1 - 3):
            r.choices(mart_ops, weights=(4, 2, 2))[0](4)
        for _ in range(n_mart - m1):
            r.choices([*mart_ops, self._mart_trend], weights=(2, 1, 1, 3))[0](5)
        for _ in range(n_met):
            self._metric(6)
        # Trim rounding excess so exactly n models exist (drop from the end: nothing depends on metrics).
        del self.models[n:]
        return self.models
