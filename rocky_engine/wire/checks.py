"""Check results: ``check_results[].checks[]`` of the run document, one model per check kind.

Every check is ``{name, passed, severity, error?, ...detail}``; the detail depends on the kind:

- ``row_count`` ``{source_count?, target_count?}``; ``column_match`` ``{missing, extra}``;
  ``freshness`` ``{lag_seconds?, threshold_seconds}``; ``null_rate`` ``{column, null_rate?, threshold}``;
- a custom SQL check (any name) ``{query, result_value?}``;
- an assertion ``{kind, column?, columns?, filter?, failing_rows?, ...}``, one model per ``kind``
  (``row_count_range`` adds ``{row_count, min?, max?}``, ``aggregate`` adds ``{actual, op, cmp, value}``).

A check writes exactly the details it measured (``OMIT_UNSET``): a custom query that returned NULL writes
``"result_value": null``, a check the warehouse refused writes its ``error`` and no numbers.

The JSON carries no explicit tag, so :func:`check_tag` tells the kinds apart: an object with ``kind`` is an
assertion, one with ``query`` is a custom check (its name is the user's, possibly ``row_count``), otherwise
the name of a built-in check decides. What none of these match (a check of a newer engine) reads as
:class:`UnknownCheck`, which keeps every key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag

from rocky_engine.wire.base import WireModel, published

_HEAD = frozenset({"name", "passed", "severity"})


class CheckResult(WireModel):
    """One check of one table: the fields every kind has."""

    OMIT_UNSET: ClassVar[bool] = True
    ALWAYS: ClassVar[frozenset[str]] = _HEAD
    WRITE_LAST: ClassVar[tuple[str, ...]] = ("error",)
    #: the discriminator tag of this model (see :func:`check_tag`)
    TAG: ClassVar[str] = "unknown"

    name: str
    passed: bool
    severity: str = "error"
    #: the warehouse's message when the check could not be evaluated (``not_evaluated`` to the published
    #: client)
    error: str | None = published("not_evaluated", None)

    @property
    def details(self) -> dict[str, Any]:
        """The kind-specific fields as written (``source_count``, ``lag_seconds``, ``failing_rows`` ...)."""
        doc = {k: v for k, v in self.wire().items() if k not in _HEAD}
        doc.update(self.model_extra or {})
        return doc

    @property
    def fails_gate(self) -> bool:
        """A failed error-severity check: what fails a quality gate or a check gate."""
        return not self.passed and self.severity == "error"

    def number(self) -> float | int | None:
        """The number this check is best summarised by (``check_history.value``); None when it has none."""
        return None


def _numeric(value: Any) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class RowCountCheck(CheckResult):
    """Source and target row counts agree (without a source: the target's count, passed)."""

    TAG: ClassVar[str] = "row_count"
    name: Literal["row_count"] = "row_count"
    source_count: int | None = None
    target_count: int | None = None

    def number(self) -> float | int | None:
        return self.target_count


class ColumnMatchCheck(CheckResult):
    """Source and target have the same column names."""

    TAG: ClassVar[str] = "column_match"
    name: Literal["column_match"] = "column_match"
    missing: list[str] | None = None
    extra: list[str] | None = None


class FreshnessCheck(CheckResult):
    """``now - MAX(timestamp column)`` is within the threshold."""

    TAG: ClassVar[str] = "freshness"
    name: Literal["freshness"] = "freshness"
    lag_seconds: int | None = None
    threshold_seconds: int | None = None

    def number(self) -> float | int | None:
        return self.lag_seconds


class NullRateCheck(CheckResult):
    """The share of NULLs in one column is within the threshold."""

    TAG: ClassVar[str] = "null_rate"
    name: Literal["null_rate"] = "null_rate"
    column: str | None = None
    null_rate: float | None = None
    threshold: float | None = None

    def number(self) -> float | int | None:
        return self.null_rate


class CustomCheck(CheckResult):
    """A user query whose single value must not exceed its threshold."""

    TAG: ClassVar[str] = "custom"
    query: str
    result_value: Any = None

    def number(self) -> float | int | None:
        return _numeric(self.result_value)


class AssertionCheck(CheckResult):
    """A declarative assertion: the rows that break it (``failing_rows``)."""

    kind: str
    column: str | None = None
    filter: str | None = None
    failing_rows: int | None = None

    def number(self) -> float | int | None:
        return self.failing_rows


class NotNullAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:not_null"
    kind: Literal["not_null"] = "not_null"


class UniqueAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:unique"
    kind: Literal["unique"] = "unique"


class AcceptedValuesAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:accepted_values"
    kind: Literal["accepted_values"] = "accepted_values"


class RelationshipsAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:relationships"
    kind: Literal["relationships"] = "relationships"


class ExpressionAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:expression"
    kind: Literal["expression"] = "expression"


class InRangeAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:in_range"
    kind: Literal["in_range"] = "in_range"


class RegexMatchAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:regex_match"
    kind: Literal["regex_match"] = "regex_match"


class NotInFutureAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:not_in_future"
    kind: Literal["not_in_future"] = "not_in_future"


class OlderThanNDaysAssertion(AssertionCheck):
    TAG: ClassVar[str] = "assertion:older_than_n_days"
    kind: Literal["older_than_n_days"] = "older_than_n_days"


class CompositeAssertion(AssertionCheck):
    """No two rows share the combination of ``columns``."""

    TAG: ClassVar[str] = "assertion:composite"
    WRITE_LAST: ClassVar[tuple[str, ...]] = ("failing_rows", "error")
    kind: Literal["composite"] = "composite"
    columns: list[str] | None = None


Bound = int | float | str


class RowCountRangeAssertion(AssertionCheck):
    """The table's row count is within ``[min, max]`` (``failing_rows`` is 0 or 1)."""

    TAG: ClassVar[str] = "assertion:row_count_range"
    kind: Literal["row_count_range"] = "row_count_range"
    row_count: int | float | None = None
    min: Bound | None = None
    max: Bound | None = None


class AggregateAssertion(AssertionCheck):
    """``op(column) cmp value`` holds (``failing_rows`` is 0 or 1)."""

    TAG: ClassVar[str] = "assertion:aggregate"
    kind: Literal["aggregate"] = "aggregate"
    actual: Any = None
    op: str | None = None
    cmp: str | None = None
    value: Bound | None = None


class UnknownCheck(CheckResult):
    """A check this version does not know (a newer engine's): every key is kept in ``details``."""

    model_config = ConfigDict(extra="allow")
    TAG: ClassVar[str] = "unknown"

    def wire(self) -> dict[str, Any]:
        return {**super().wire(), **(self.model_extra or {})}


_BUILTIN: tuple[type[CheckResult], ...] = (RowCountCheck, ColumnMatchCheck, FreshnessCheck, NullRateCheck)
ASSERTION_MODELS: tuple[type[AssertionCheck], ...] = (
    NotNullAssertion, UniqueAssertion, AcceptedValuesAssertion, RelationshipsAssertion, ExpressionAssertion,
    InRangeAssertion, RegexMatchAssertion, NotInFutureAssertion, OlderThanNDaysAssertion, CompositeAssertion,
    RowCountRangeAssertion, AggregateAssertion,
)
#: assertion ``kind`` -> its model
ASSERTION_BY_KIND: dict[str, type[AssertionCheck]] = {
    m.TAG.removeprefix("assertion:"): m for m in ASSERTION_MODELS
}
_BUILTIN_TAGS = frozenset(m.TAG for m in _BUILTIN)


def check_tag(value: Any) -> str:
    """Which check model reads ``value`` (a JSON object or an already-built check)."""
    if isinstance(value, CheckResult):
        return type(value).TAG
    if not isinstance(value, dict):
        return "unknown"
    kind = value.get("kind")
    if kind is not None:
        return f"assertion:{kind}" if kind in ASSERTION_BY_KIND else "unknown"
    if "query" in value:
        return CustomCheck.TAG
    name = value.get("name")
    return name if name in _BUILTIN_TAGS else "unknown"


AnyCheck = Annotated[
    Annotated[RowCountCheck, Tag(RowCountCheck.TAG)]
    | Annotated[ColumnMatchCheck, Tag(ColumnMatchCheck.TAG)]
    | Annotated[FreshnessCheck, Tag(FreshnessCheck.TAG)]
    | Annotated[NullRateCheck, Tag(NullRateCheck.TAG)]
    | Annotated[CustomCheck, Tag(CustomCheck.TAG)]
    | Annotated[NotNullAssertion, Tag(NotNullAssertion.TAG)]
    | Annotated[UniqueAssertion, Tag(UniqueAssertion.TAG)]
    | Annotated[AcceptedValuesAssertion, Tag(AcceptedValuesAssertion.TAG)]
    | Annotated[RelationshipsAssertion, Tag(RelationshipsAssertion.TAG)]
    | Annotated[ExpressionAssertion, Tag(ExpressionAssertion.TAG)]
    | Annotated[InRangeAssertion, Tag(InRangeAssertion.TAG)]
    | Annotated[RegexMatchAssertion, Tag(RegexMatchAssertion.TAG)]
    | Annotated[NotInFutureAssertion, Tag(NotInFutureAssertion.TAG)]
    | Annotated[OlderThanNDaysAssertion, Tag(OlderThanNDaysAssertion.TAG)]
    | Annotated[CompositeAssertion, Tag(CompositeAssertion.TAG)]
    | Annotated[RowCountRangeAssertion, Tag(RowCountRangeAssertion.TAG)]
    | Annotated[AggregateAssertion, Tag(AggregateAssertion.TAG)]
    | Annotated[UnknownCheck, Tag(UnknownCheck.TAG)],
    Discriminator(check_tag),
]


class TableCheckResult(WireModel):
    """The checks of one table: ``{asset_key, checks[]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset({"checks"})

    asset_key: list[str]
    if TYPE_CHECKING:
        # What code reads and appends: any check (the union below is how a document is read).
        checks: list[CheckResult] = Field(default_factory=list)
    else:
        checks: list[AnyCheck] = Field(default_factory=list)
