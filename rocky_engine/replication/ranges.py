"""Parallel range reads of one large table: how many, on which key, and the SELECT of each range.

``[pipeline.NAME.source] parallel_reads`` is ``"auto"`` or a number N >= 1. With more than one read, a
cross-warehouse copy splits its source SELECT on a key column into N contiguous ranges from the key's
``MIN``/``MAX`` (over the rows the copy reads: an incremental copy's bound included), and the source reads
them concurrently (PostgreSQL: a COPY on its own connection each) into one target statement.

``auto`` is 1 (a single stream) unless the machine has at least 4 cores and the table is large
(``AUTO_MIN_ROWS`` by the source's row estimate); then ``min(4, cores // 2)``. On 2 cores the measurement
said no (bench/replication_peers.md: the server's backends, the reader and DuckDB already use both cores;
more streams only compete for them), so the default there stays one stream.

The key is ``split_column`` when set, else the pipeline's ``timestamp_column``; it must be an integer,
date or timestamp column, otherwise the copy reads one stream. Ranges are half-open and cover every row:
the first takes everything below its upper bound, the last everything from its lower bound, and the rows
whose key is NULL.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocky_engine.adapters.base import WarehouseSession
    from rocky_engine.adapters.dialect import Dialect

#: a table below this many rows (the source's estimate) is read as one stream by ``auto``
AUTO_MIN_ROWS = 1_000_000
#: ``auto`` never reads more ranges than this
AUTO_MAX_READS = 4
#: key families a range can split on (values that order and subtract)
SPLITTABLE = frozenset({"int", "date", "timestamp", "timestamptz"})


def resolve_reads(setting: str | int, row_estimate: int | None, cores: int | None = None) -> int:
    """How many range reads a table gets (``setting``: ``"auto"`` or N)."""
    if setting != "auto":
        return max(1, int(setting))
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if cores < 4 or row_estimate is None or row_estimate < AUTO_MIN_ROWS:
        return 1
    return min(AUTO_MAX_READS, cores // 2)


def range_statements(
    source: WarehouseSession, dialect: Dialect, sql: str, params: Sequence[Any], *, has_where: bool,
    key: str, key_type: str, reads: int,
) -> list[tuple[str, list[Any]]]:
    """The ``(sql, params)`` of every range of ``sql`` split on ``key`` (one item: read it whole).

    ``sql`` is the copy's source SELECT (``has_where``: it already has a WHERE clause).
    """
    whole = [(sql, list(params))]
    if reads <= 1:
        return whole
    col = dialect.quote(key)
    joiner = " AND " if has_where else " WHERE "
    rows = source.query(f"SELECT MIN({col}), MAX({col}) FROM ({sql}) AS r", list(params))
    lo, hi = rows[0] if rows else (None, None)
    if lo is None or hi is None or lo == hi:  # empty, only NULL keys, or one value: nothing to split
        return whole
    bounds = _bounds(lo, hi, reads)
    if not bounds:
        return whole
    cast = f"CAST(? AS {key_type})"
    out: list[tuple[str, list[Any]]] = [(f"{sql}{joiner}{col} < {cast}", [*params, bounds[0]])]
    for low, high in itertools.pairwise(bounds):
        out.append((f"{sql}{joiner}{col} >= {cast} AND {col} < {cast}", [*params, low, high]))
    out.append((f"{sql}{joiner}({col} >= {cast} OR {col} IS NULL)", [*params, bounds[-1]]))
    return out


def _bounds(lo: Any, hi: Any, reads: int) -> list[Any]:
    """``reads - 1`` increasing inner bounds between ``lo`` and ``hi`` (duplicates dropped)."""
    step = hi - lo
    bounds: list[Any] = []
    for i in range(1, reads):
        bound = lo + step * i // reads
        if bound > lo and (not bounds or bound > bounds[-1]):
            bounds.append(bound)
    return bounds
