"""Child program of the replication-peers workload: does each target hold exactly its source?

    replication_peers_verify.py URI DB PAIRS_JSON

For every [source, target] pair it computes the same fingerprint on both sides and compares them:

- `rows`, `sum_id`: row count and sum of ids (ids are unique in the source, so a duplicate or a lost row
  shows in one of them);
- `amount`: the exact sum of `numeric(12,2)` as a decimal string (a float on the way loses cents);
- `updated_at`: the sum of the instants in microseconds since the epoch. The source databases default to
  America/New_York, so a reader that stores the session's wall-clock time instead of the UTC instant is off
  by hours; a target column without a time zone is read as UTC;
- `nulls`: how many `note` values are NULL (an empty string instead of NULL shows here);
- `qty`, `active`, `day`, `name_len`, `score`: the other columns (score within 1e-9 relative: a double's sum
  depends on the order).

Also reports the target's column types. Prints {"tables": N, "mismatches": [...], "types": {...}} with the
types of the first target. Reads the DuckDB file read-only (it may have been written by DuckDB 1.5.5: Sling's
CLI, the postgres extension's venv).
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg

KEYS = ("rows", "sum_id", "amount", "updated_at", "nulls", "qty", "active", "day", "name_len", "score")

_PG = """SELECT count(*), sum(id), sum(amount)::text,
 sum((extract(epoch FROM updated_at) * 1000000)::bigint)::text, count(*) - count(note), sum(qty),
 count(*) FILTER (WHERE active), sum(day - DATE '1970-01-01'), sum(length(name)), sum(score) FROM {t}"""

_DUCK = """SELECT count(*), sum(id), sum(amount::DECIMAL(38,2))::VARCHAR, sum(epoch_us({ts}))::VARCHAR,
 count(*) - count(note), sum(qty), count(*) FILTER (WHERE active),
 sum(datediff('day', DATE '1970-01-01', day::DATE)), sum(length(name)), sum(score) FROM {t}"""


def _ts_expr(con: duckdb.DuckDBPyConnection, target: str) -> str:
    """updated_at as an instant: TIMESTAMPTZ as is, a naive TIMESTAMP read as UTC."""
    schema, table = target.split(".")
    row = con.execute("SELECT data_type FROM information_schema.columns WHERE table_schema = ? AND "
                      "table_name = ? AND column_name = 'updated_at'", [schema, table]).fetchall()
    kind = str(row[0][0]) if row else ""
    return "updated_at" if "TIME ZONE" in kind else "timezone('UTC', updated_at)"


def _norm(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in ("amount", "updated_at"):
        return format(Decimal(str(value)).normalize(), "f")
    if key == "score":
        return float(value)
    return int(value)


def _differs(key: str, src: Any, tgt: Any) -> bool:
    if key == "score" and src is not None and tgt is not None:
        return abs(src - tgt) > 1e-9 * max(1.0, abs(src))
    return bool(src != tgt)


def types_of(con: duckdb.DuckDBPyConnection, target: str) -> dict[str, str]:
    schema, table = target.split(".")
    rows = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ? "
                       "AND table_name = ? ORDER BY ordinal_position", [schema, table]).fetchall()
    return {str(n): str(t) for n, t in rows}


def verify(uri: str, db: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    duck = duckdb.connect(db, read_only=True)
    mismatches: list[dict[str, Any]] = []
    with psycopg.connect(uri, autocommit=True) as pg:
        for source, target in pairs:
            src_row = pg.execute(_PG.format(t=source)).fetchone() or ()
            try:
                sql = _DUCK.format(t=target, ts=_ts_expr(duck, target))
                tgt_row = (duck.execute(sql).fetchall() or [()])[0]
            except duckdb.Error as exc:
                mismatches.append({"target": target, "error": str(exc).splitlines()[0][:300]})
                continue
            src = {k: _norm(k, v) for k, v in zip(KEYS, src_row, strict=True)}
            tgt = {k: _norm(k, v) for k, v in zip(KEYS, tgt_row, strict=True)}
            bad = {k: [src[k], tgt[k]] for k in KEYS if _differs(k, src[k], tgt[k])}
            if bad:
                mismatches.append({"target": target, "differs (source, target)": bad})
    types = types_of(duck, pairs[0][1]) if pairs else {}
    duck.close()
    return {"tables": len(pairs), "mismatches": mismatches, "types": types}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    uri, db, pairs_path = argv
    pairs = [(str(p[0]), str(p[1])) for p in json.loads(Path(pairs_path).read_text())]
    json.dump(verify(uri, db, pairs), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
