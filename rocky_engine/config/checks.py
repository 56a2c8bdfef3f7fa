"""``[pipeline.NAME.checks]``: built-in quality checks and declarative assertions (strict keys)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rocky_engine.config.base import Bound, Number, NumberOrNumeric, Scalar, Severity, StrictModel

AssertionType = Literal[
    "not_null",
    "unique",
    "accepted_values",
    "relationships",
    "expression",
    "row_count_range",
    "in_range",
    "regex_match",
    "aggregate",
    "composite",
    "not_in_future",
    "older_than_n_days",
]

#: Keys each assertion type needs besides ``table`` and ``type``; a tuple inside means "at least one of".
ASSERTION_REQUIRED: dict[str, tuple[str | tuple[str, ...], ...]] = {
    "not_null": ("column",),
    "unique": ("column",),
    "accepted_values": ("column", "values"),
    "relationships": ("column", "to_table", "to_column"),
    "expression": ("expression",),
    "row_count_range": (("min", "max"),),
    "in_range": ("column", ("min", "max")),
    "regex_match": ("column", "pattern"),
    "aggregate": ("op", "cmp", "value"),
    "composite": ("columns",),
    "not_in_future": ("column",),
    "older_than_n_days": ("column", "days"),
}

AggregateOp = Literal["sum", "avg", "min", "max", "count"]
Comparison = Literal["<", "<=", ">", ">=", "=", "!="]

# Word spellings are accepted because TOML users write them as often as symbols; one spelling downstream.
_CMP_ALIASES: dict[str, str] = {
    "lt": "<",
    "lte": "<=",
    "le": "<=",
    "gt": ">",
    "gte": ">=",
    "ge": ">=",
    "eq": "=",
    "==": "=",
    "ne": "!=",
    "neq": "!=",
    "<>": "!=",
}


class ColumnMatchCheck(StrictModel):
    """Source and target have the same columns."""

    enabled: bool = False
    severity: Severity = "error"


class FreshnessCheck(StrictModel):
    """The newest timestamp of a table is at most ``threshold_seconds`` old."""

    threshold_seconds: int = Field(ge=1)
    severity: Severity = "warning"


class NullRateCheck(StrictModel):
    """The share of NULLs in ``columns`` stays at or below ``threshold`` (0..1)."""

    columns: list[str] = Field(min_length=1)
    threshold: float = Field(ge=0.0, le=1.0)
    severity: Severity = "warning"


class CustomCheck(StrictModel):
    """A SQL query (``{target}`` is replaced by the table) whose single value must not exceed threshold."""

    name: str = Field(min_length=1)
    sql: str = Field(min_length=1)
    threshold: Number = 0
    severity: Severity = "error"


class Assertion(StrictModel):
    """One ``[[pipeline.NAME.checks.assertions]]`` entry; per-type keys are checked after parsing."""

    table: str = Field(min_length=1)
    type: AssertionType
    column: str | None = None
    name: str | None = None
    severity: Severity = "error"
    #: a SQL predicate restricting the rows the assertion looks at
    filter: str | None = None
    values: list[Scalar] | None = None
    to_table: str | None = None
    to_column: str | None = None
    expression: str | None = None
    #: ``in_range`` / ``row_count_range`` bounds; ``"10"`` is the number 10, ``"2024-01-01"`` stays text
    min: Bound | None = None
    max: Bound | None = None
    pattern: str | None = None
    op: AggregateOp | None = None
    cmp: Comparison | None = None
    #: upstream projects write ``value = "0"``; a string that reads as a number is that number
    value: NumberOrNumeric | None = None
    columns: list[str] | None = None
    #: ``composite`` only: what the column combination must satisfy; ``unique`` is the one kind
    kind: Literal["unique"] | None = None
    days: int | None = Field(default=None, ge=0)

    @field_validator("cmp", mode="before")
    @classmethod
    def _normalize_cmp(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _CMP_ALIASES.get(value.strip().lower(), value.strip())
        return value

    @model_validator(mode="after")
    def _per_type_keys(self) -> Assertion:
        for need in ASSERTION_REQUIRED[self.type]:
            options = need if isinstance(need, tuple) else (need,)
            if all(getattr(self, key) in (None, []) for key in options):
                wanted = " or ".join(f"'{k}'" for k in options)
                raise PydanticCustomError(
                    "rocky_assertion_key",
                    "assertion type '{type}' needs {wanted}",
                    {"type": self.type, "wanted": wanted},
                )
        if self.kind is not None and self.type != "composite":
            raise PydanticCustomError(
                "rocky_assertion_key",
                "'kind' applies to assertion type 'composite' only (this one is '{type}')",
                {"type": self.type},
            )
        if self.type == "aggregate" and self.op != "count" and not self.column:
            raise PydanticCustomError(
                "rocky_assertion_key",
                "assertion type 'aggregate' with op '{op}' needs 'column'",
                {"op": self.op},
            )
        return self

    @property
    def display_name(self) -> str:
        """``name`` when set, else ``<type>:<column>`` (or ``<type>`` for table-level assertions).

        ``unique:customer_id`` is the name upstream Rocky synthesizes, so check names (check_history,
        brief, dashboards keyed on them) stay the same when a project moves between the engines.
        """
        if self.name:
            return self.name
        return f"{self.type}:{self.column}" if self.column else self.type


class ChecksConfig(StrictModel):
    """Which checks run after a pipeline materializes a table."""

    enabled: bool = True
    row_count: bool = False
    column_match: ColumnMatchCheck = Field(default_factory=ColumnMatchCheck)
    freshness: FreshnessCheck | None = None
    null_rate: NullRateCheck | None = None
    custom: list[CustomCheck] = Field(default_factory=list)
    anomaly_threshold_pct: Number = Field(default=50)
    fail_on_error: bool = True
    assertions: list[Assertion] = Field(default_factory=list)

    @field_validator("column_match", mode="before")
    @classmethod
    def _column_match_bool(cls, value: Any) -> Any:
        # `column_match = true` is the short form of `column_match = { enabled = true }`.
        if isinstance(value, bool):
            return {"enabled": value}
        return value
