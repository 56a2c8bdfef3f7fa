"""Schema drift between a source table and its existing target, decided before the copy.

- a column new in the source: ``ALTER TABLE ... ADD COLUMN`` (existing target rows get NULL);
- a column whose type widened safely (the target dialect's ``is_safe_widening``): ``ALTER COLUMN ... TYPE``;
- any other type change, a narrowing included: drop the target and rebuild it with a full copy;
- a column gone from the source: kept in the target, new rows get NULL there. Not reported: it would
  read as drift on every later run, and nothing needs doing.

Metadata columns (``metadata_columns``) exist only in the target, so they never look like drift. Full-refresh
tables are rebuilt on every run, so they are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocky_engine.adapters.base import Column

if TYPE_CHECKING:
    from rocky_engine.adapters.dialect import Dialect

ADD_COLUMN = "add_column"
ALTER_COLUMN_TYPE = "alter_column_type"
DROP_AND_RECREATE = "drop_and_recreate"


@dataclass(frozen=True, slots=True)
class DriftStep:
    action: str
    reason: str
    #: the columns the step is about (the ``rocky.events`` drift event names them)
    columns: tuple[str, ...] = ()


@dataclass
class DriftDecision:
    """What to do to the target before copying into it."""

    rebuild: bool = False
    #: (column, type rendered in the target dialect)
    add_columns: list[tuple[str, str]] = field(default_factory=list)
    alter_columns: list[tuple[str, str]] = field(default_factory=list)
    steps: list[DriftStep] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        return bool(self.steps)


def decide(
    source: list[Column],
    target: list[Column],
    *,
    source_dialect: Dialect,
    target_dialect: Dialect,
) -> DriftDecision:
    """Compare an existing target with its source (both from the run's one catalog read)."""
    if type(source_dialect) is type(target_dialect):
        # The usual case, decided without parsing a type: in one dialect an identically spelled type is
        # the same type, so a target with every source column under the same type has not drifted.
        spelled = {c.name: c.data_type for c in target}
        if all(spelled.get(c.name) == c.data_type for c in source):
            return DriftDecision()
    decision = DriftDecision()
    existing = {c.name: c for c in target}
    rebuild_reasons: list[str] = []
    rebuilt: list[str] = []
    for col in source:
        expected = target_dialect.column_type_from(col.data_type, source_dialect)
        rendered = target_dialect.render_type(expected)
        have = existing.get(col.name)
        if have is None:
            decision.add_columns.append((col.name, rendered))
            reason = f"column '{col.name}' ({rendered}) is new in the source"
            decision.steps.append(DriftStep(ADD_COLUMN, reason, (col.name,)))
            continue
        actual = target_dialect.parse_type(have.data_type)
        if target_dialect.same_type(expected, actual):
            continue
        if target_dialect.is_safe_widening(actual, expected):
            decision.alter_columns.append((col.name, rendered))
            decision.steps.append(
                DriftStep(ALTER_COLUMN_TYPE, f"column '{col.name}' widened {have.data_type} -> {rendered}",
                          (col.name,))
            )
        else:
            rebuilt.append(col.name)
            rebuild_reasons.append(
                f"column '{col.name}' changed {have.data_type} -> {rendered}, which is not a safe widening"
            )
    if rebuild_reasons:
        return DriftDecision(rebuild=True, steps=[
            DriftStep(DROP_AND_RECREATE, "; ".join(rebuild_reasons), tuple(rebuilt))])
    return decision
