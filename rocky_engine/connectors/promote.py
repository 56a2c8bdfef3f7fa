"""Stage a checked batch, fix drift, check the contract, and append it to the target with one INSERT.

The staging relation is ``<table>__rocky_stg_<run id>`` in the target's schema, one for every file of the
batch. On DuckDB it is a view over the checked Parquet files (``read_parquet`` of the scratch paths):
the files are immutable once checked, a view costs nothing to create or drop, and the promote then reads
each file once, which keeps a connector load within 1.3x of a bare ``INSERT ... SELECT * FROM
read_parquet(...)`` (a copied staging table would write every row twice). Drift, the contract and the
promote all read the staging relation, exactly as they would read a table.

Drift (seeds/child-connectors.md "Schema drift"), batch against target:

- a batch column the target lacks: ``ALTER TABLE ... ADD COLUMN``;
- a batch type that safely widens the target's (the engine's one rule set, through
  the dialect's ``is_safe_widening``): ``ALTER COLUMN ... TYPE``;
- a batch type the target's type already covers (INTEGER into BIGINT): nothing, the INSERT casts;
- any other change fails the run: the load only appends, so the target is never rebuilt.

The INSERT names every batch column, so files whose columns are in another order than the target's land
in the right columns; target columns the batch lacks get NULL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rocky_engine.adapters.base import Column, WarehouseAdapter
from rocky_engine.adapters.dialect import Dialect
from rocky_engine.config.connectors import ConnectorTarget
from rocky_engine.connectors.contract import Contract, check_contract
from rocky_engine.connectors.result import ResultFile
from rocky_engine.errors import ConnectorError
from rocky_engine.logs import get_logger

STAGING_MARKER = "__rocky_stg_"
#: A run id as this engine mints them (32 hex digits); other suffixes are not Rocky's staging tables.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")

log = get_logger("connector")


class DriftError(ConnectorError):
    """The batch changes a column in a way an append-only load cannot follow."""


def staging_name(table: str, run_id: str) -> str:
    return f"{table}{STAGING_MARKER}{run_id}"


@dataclass
class DriftPlan:
    """The ALTERs the target needs before the promote."""

    add_columns: list[tuple[str, str]] = field(default_factory=list)
    alter_columns: list[tuple[str, str]] = field(default_factory=list)

    @property
    def steps(self) -> list[str]:
        return [f"ADD COLUMN {n} {t}" for n, t in self.add_columns] + [
            f"ALTER COLUMN {n} TYPE {t}" for n, t in self.alter_columns
        ]


def plan_drift(batch: list[Column], target: list[Column], dialect: Dialect) -> DriftPlan:
    """Compare the staged batch with the existing target (types as ``dialect``, the target's, has them).

    Raises:
        DriftError: a column's type changed in a way that is not a safe widening (every such column named).
    """
    plan = DriftPlan()
    have = {c.name.lower(): c for c in target}
    refused: list[str] = []
    for col in batch:
        existing = have.get(col.name.lower())
        if existing is None:
            plan.add_columns.append((col.name, col.data_type))
            continue
        new, old = dialect.parse_type(col.data_type), dialect.parse_type(existing.data_type)
        if dialect.same_type(new, old) or dialect.is_safe_widening(new, old):
            continue
        if dialect.is_safe_widening(old, new):
            plan.alter_columns.append((existing.name, col.data_type))
            continue
        refused.append(f"column '{col.name}' is {existing.data_type} in the target and {col.data_type} in "
                       "the batch")
    if refused:
        raise DriftError(
            "schema drift that is not a safe widening: " + "; ".join(refused),
            hint="the load only appends, so Rocky never rebuilds the target; change the program's output "
            "type, or alter or rebuild the target table yourself",
        )
    return plan


def check_same_columns(files: list[ResultFile]) -> bool:
    """Every file must have the first file's columns (names and types; the order may differ).

    Returns:
        True when every file also has the first file's column order.

    Raises:
        ConnectorError: a later file differs from the first one (the difference named).
    """
    first = files[0]
    want = dict(first.columns)
    same_order = True
    for other in files[1:]:
        got = dict(other.columns)
        if got == want:
            same_order = same_order and other.columns == first.columns
            continue
        diffs = [f"missing {n}" for n in want if n not in got]
        diffs += [f"extra {n}" for n in got if n not in want]
        diffs += [f"{n} is {got[n]} instead of {t}" for n, t in want.items() if n in got and got[n] != t]
        raise ConnectorError(
            f"all files of a batch must have the same columns: {other.path!r} differs from {first.path!r} "
            f"({'; '.join(diffs)})",
            hint="write every file of one run with the same schema",
        )
    return same_order


class Promoter:
    """One batch's way from staging to the target, on one warehouse connection."""

    def __init__(self, adapter: WarehouseAdapter, target: ConnectorTarget, run_id: str) -> None:
        self.adapter = adapter
        self.target = target
        self.staging = staging_name(target.table, run_id)
        self.staging_rel = adapter.qualified(target.schema_, self.staging, target.catalog)
        self.target_rel = adapter.qualified(target.schema_, target.table, target.catalog)
        self.staged = False
        self.columns: list[Column] = []
        self.drift: list[str] = []

    def drop_leftovers(self, in_flight: set[str]) -> list[str]:
        """Drop staging relations of this target that crashed runs left behind.

        A staging relation is Rocky's when its name is ``<table>__rocky_stg_<32 hex digits>``; it is left
        alone while its run id holds an unexpired in-flight claim (that run may still be going).
        """
        prefix = self.target.table + STAGING_MARKER
        dropped: list[str] = []
        schema = self.target.schema_
        for rel in self.adapter.list_relations(self.target.catalog):
            if rel.schema != schema or not rel.name.startswith(prefix):
                continue
            run_id = rel.name[len(prefix):]
            if not _RUN_ID.match(run_id) or run_id in in_flight or rel.name == self.staging:
                continue
            kind = "VIEW" if rel.kind == "view" else "TABLE"
            qualified = self.adapter.qualified(schema, rel.name, self.target.catalog)
            self.adapter.execute(f"DROP {kind} IF EXISTS {qualified}")
            log.warning("dropped staging %s %s left behind by crashed run %s", kind.lower(), qualified,
                        run_id)
            dropped.append(rel.name)
        return dropped

    def stage(self, files: list[ResultFile]) -> None:
        """Create the staging relation over every file of the batch."""
        same_order = check_same_columns(files)
        scan = self.adapter.dialect.scan_files("parquet", [str(f.absolute) for f in files],
                                               union_by_name=not same_order)
        self.adapter.ensure_schema(self.target.schema_, self.target.catalog)
        self.adapter.execute(f"CREATE VIEW {self.staging_rel} AS SELECT * FROM {scan}")
        self.staged = True
        self.columns = self.adapter.describe(self.target.schema_, self.staging, self.target.catalog)

    def check(self, contract: Contract | None, rows: int) -> None:
        if contract is not None:
            check_contract(self.adapter, self.staging_rel, self.columns, rows, contract)

    def prepare_target(self) -> list[str]:
        """Create the target when missing, or apply the drift ALTERs; returns the steps taken."""
        existing = self.adapter.describe(self.target.schema_, self.target.table, self.target.catalog)
        if not existing:
            self.adapter.execute(
                f"CREATE TABLE {self.target_rel} AS SELECT * FROM {self.staging_rel} LIMIT 0"
            )
            self.drift = [f"CREATE TABLE {self.target.full_name}"]
            return self.drift
        dialect = self.adapter.dialect
        plan = plan_drift(self.columns, existing, dialect)
        for name, data_type in plan.add_columns:
            dialect.add_column(self.adapter, self.target_rel, name, data_type)
        for name, data_type in plan.alter_columns:
            dialect.widen_column(self.adapter, self.target_rel, name, data_type)
        self.drift = plan.steps
        for step in self.drift:
            log.info("schema drift on %s: %s", self.target.full_name, step)
        return self.drift

    def promote(self) -> int:
        """The one INSERT that appends the batch; returns the rows appended."""
        names = ", ".join(self.adapter.quote(c.name) for c in self.columns)
        rows = self.adapter.execute(
            f"INSERT INTO {self.target_rel} ({names}) SELECT {names} FROM {self.staging_rel}"
        )
        return int(rows or 0)

    def drop_staging(self) -> None:
        if self.staged:
            self.adapter.execute(f"DROP VIEW IF EXISTS {self.staging_rel}")
            self.staged = False
