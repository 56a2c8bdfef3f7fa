"""Child program of the replication and drift workloads (the only place they import duckdb).

Runs as its own process so the harness reads its wall time and peak RSS with `os.wait4`, and so the
harness's own RSS never folds into a child's figure.

    replication_runner.py exec DB SQL_FILE      the statements of SQL_FILE one at a time on one connection;
                                                prints {"import_s", "sql_s"} (sql_s: connect to close)
    replication_runner.py two DB SQL_FILE       the same statements, two in flight on two cursors of one
                                                connection (two threads); same output
    replication_runner.py verify DB PAIRS_JSON  per [source, target] pair: row counts and id sets; prints
                                                {"tables": N, "mismatches": [...]}
    replication_runner.py compare DB PAIRS_JSON exact equality on every column (EXCEPT ALL both ways,
                                                counts, column types); prints one report per pair

Statements in SQL_FILE are separated by a line holding only `;`, so no SQL parsing is needed here.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import json  # noqa: E402 - after _T0 so import_s covers every import of this program
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import duckdb  # noqa: E402
from raw_runner import run_level  # noqa: E402 - bench/ is this script's sys.path[0]

_IMPORT_S = time.perf_counter() - _T0
SEPARATOR = "\n;\n"


def statements(path: Path) -> list[str]:
    return [s.strip() for s in path.read_text().split(SEPARATOR) if s.strip()]


def run_serial(db: str, sqls: list[str]) -> float:
    start = time.perf_counter()
    con = duckdb.connect(db)
    for sql in sqls:
        con.execute(sql)
    con.close()
    return time.perf_counter() - start


def run_two(db: str, sqls: list[str], workers: int = 2) -> float:
    """Table statements are independent of each other, so two threads pull them from one shared queue;
    `CREATE SCHEMA` statements run first, serially, because the tables need them."""
    start = time.perf_counter()
    con = duckdb.connect(db)
    for sql in sqls:
        if sql.startswith("CREATE SCHEMA"):
            con.execute(sql)
    pending = [sql for sql in sqls if not sql.startswith("CREATE SCHEMA")]
    cursors = [con.cursor() for _ in range(workers)]
    try:
        run_level(cursors, pending)  # the same two-cursor worker pool as the transformation raw-2 runner
    finally:
        for c in cursors:
            c.close()
    con.close()
    return time.perf_counter() - start


def _pairs(path: Path) -> list[tuple[str, str]]:
    data: list[list[str]] = json.loads(path.read_text())
    return [(src, tgt) for src, tgt in data]


def verify(db: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Row counts equal and the same set of ids (source ids are unique, so this also rules out duplicates)."""
    con = duckdb.connect(db, read_only=True)
    mismatches: list[dict[str, Any]] = []
    # Batches of UNION ALL keep the number of round trips low without one giant statement.
    for i in range(0, len(pairs), 50):
        parts = [
            f"SELECT '{tgt}' AS t, (SELECT count(*) FROM {src}) AS sc, (SELECT count(*) FROM {tgt}) AS tc, "
            f"(SELECT count(*) FROM (SELECT id FROM {src} EXCEPT SELECT id FROM {tgt})) AS missing, "
            f"(SELECT count(*) FROM (SELECT id FROM {tgt} EXCEPT SELECT id FROM {src})) AS extra"
            for src, tgt in pairs[i:i + 50]
        ]
        for table, sc, tc, missing, extra in con.execute(" UNION ALL ".join(parts)).fetchall():
            if sc != tc or missing or extra:
                mismatches.append({"table": table, "source_rows": sc, "target_rows": tc,
                                   "ids_missing": missing, "ids_extra": extra})
    con.close()
    return {"tables": len(pairs), "mismatches": mismatches}


def _types(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    schema, table = relation.split(".")
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ? AND "
        "table_name = ? ORDER BY ordinal_position", [schema, table]).fetchall()
    return {str(name): str(type_) for name, type_ in rows}


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return None if row is None else row[0]


def compare(db: str, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Exact equality: same column names and types, and EXCEPT ALL empty both ways on every column."""
    con = duckdb.connect(db, read_only=True)
    reports: list[dict[str, Any]] = []
    for src, tgt in pairs:
        src_types, tgt_types = _types(con, src), _types(con, tgt)
        cols = ", ".join(f'"{c}"' for c in src_types)
        report: dict[str, Any] = {
            "source": src, "target": tgt,
            "source_rows": _scalar(con, f"SELECT count(*) FROM {src}"),
            "target_rows": _scalar(con, f"SELECT count(*) FROM {tgt}"),
            "source_types": src_types, "target_types": tgt_types,
            "types_equal": src_types == tgt_types,
        }
        if set(src_types) <= set(tgt_types):
            report["missing"] = _scalar(con, f"SELECT count(*) FROM (SELECT {cols} FROM {src} EXCEPT ALL "
                                             f"SELECT {cols} FROM {tgt})")
            report["extra"] = _scalar(con, f"SELECT count(*) FROM (SELECT {cols} FROM {tgt} EXCEPT ALL "
                                           f"SELECT {cols} FROM {src})")
        else:
            report["missing"] = report["extra"] = None  # a source column is absent from the target
        report["equal"] = bool(report["types_equal"] and report["source_rows"] == report["target_rows"]
                               and report["missing"] == 0 and report["extra"] == 0)
        reports.append(report)
    con.close()
    return reports


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in {"exec", "two", "verify", "compare"}:
        print(__doc__, file=sys.stderr)
        return 2
    mode, db, path = argv[0], argv[1], Path(argv[2])
    if mode in ("exec", "two"):
        sqls = statements(path)
        sql_s = run_serial(db, sqls) if mode == "exec" else run_two(db, sqls)
        json.dump({"import_s": _IMPORT_S, "sql_s": sql_s, "statements": len(sqls)}, sys.stdout)
    elif mode == "verify":
        json.dump(verify(db, _pairs(path)), sys.stdout)
    else:
        json.dump(compare(db, _pairs(path)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
