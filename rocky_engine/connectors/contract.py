"""The optional data contract of a connector, checked on the staging table before the promote.

Shape (``[connector.NAME]`` ``contract = { ... }``)::

    contract = { columns = [ { name = "id", type = "BIGINT", nullable = false },
                             { name = "amount" } ],
                 min_rows = 1 }

- every listed column must be in the batch (names compare case-insensitively, as in DuckDB);
- ``type``, when given, must be the batch column's type (spellings compare through the engine's one type
  model, so ``INT8`` matches ``BIGINT``);
- ``nullable = false`` fails the batch when that column holds a NULL;
- ``min_rows`` fails a batch with fewer rows. A result with no files loads nothing, so it is not checked.

Columns the contract does not list are allowed: the contract says what the target relies on. Unknown keys
are refused, like everywhere in ``[connector.*]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from rocky_engine.adapters.base import Column, WarehouseAdapter
from rocky_engine.config.base import StrictModel
from rocky_engine.config.error_format import translate
from rocky_engine.errors import ConnectorError


class ContractColumn(StrictModel):
    """One column the batch must have."""

    name: str = Field(min_length=1)
    type: str | None = Field(default=None, min_length=1)
    nullable: bool = True


class Contract(StrictModel):
    """What a batch must satisfy before it reaches the target."""

    columns: list[ContractColumn] = Field(default_factory=list)
    min_rows: int | None = Field(default=None, ge=0)


class ContractError(ConnectorError):
    """The staged batch breaks the connector's contract."""


def parse_contract(raw: dict[str, Any] | None, *, connector: str, file: Path) -> Contract | None:
    """Validate ``[connector.NAME] contract``.

    Raises:
        ConfigError: an unknown key or a bad value (file and key named).
    """
    if raw is None:
        return None
    try:
        return Contract.model_validate(raw)
    except ValidationError as exc:
        raise translate(exc, file=file, prefix=("connector", connector, "contract")) from None


def check_contract(
    adapter: WarehouseAdapter, staging: str, columns: list[Column], rows: int, contract: Contract
) -> None:
    """Check ``contract`` on the staging relation ``staging`` (qualified) with ``columns`` and ``rows``.

    Raises:
        ContractError: every violation found, in one message.
    """
    dialect = adapter.dialect
    problems: list[str] = []
    by_name = {c.name.lower(): c for c in columns}
    not_null: list[str] = []
    for want in contract.columns:
        have = by_name.get(want.name.lower())
        if have is None:
            problems.append(f"column '{want.name}' is missing from the batch")
            continue
        if want.type is not None and not dialect.same_type(dialect.parse_type(want.type),
                                                           dialect.parse_type(have.data_type)):
            problems.append(f"column '{want.name}' is {have.data_type}, the contract says {want.type}")
        if not want.nullable:
            not_null.append(have.name)
    if contract.min_rows is not None and rows < contract.min_rows:
        problems.append(f"the batch has {rows} rows, the contract wants at least {contract.min_rows}")
    if not_null:
        counts = ", ".join(f"COUNT(*) FILTER (WHERE {adapter.quote(c)} IS NULL)" for c in not_null)
        found = adapter.query(f"SELECT {counts} FROM {staging}")[0]
        for name, nulls in zip(not_null, found, strict=True):
            if nulls:
                problems.append(f"column '{name}' has {nulls} NULL value(s) but is nullable = false")
    if problems:
        raise ContractError("the batch breaks the connector's contract: " + "; ".join(problems))
