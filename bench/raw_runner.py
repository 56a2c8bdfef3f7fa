"""Child program: the physical limit (raw statements straight through DuckDB), seeding and row counts.

Runs as its own process so the harness can read its wall time and peak RSS with `os.wait4`.

    raw_runner.py serial DB PLAN_JSON   one statement at a time on one connection
    raw_runner.py two DB PLAN_JSON      level by level, two statements in flight on two cursors of one
                                        connection (two threads); the best a 2-core machine gives here
    raw_runner.py seed DB SEED_SQL      create the raw tables
    raw_runner.py count DB PLAN_JSON    print {"table": rows} for every model as JSON
"""

from __future__ import annotations

import json
import sys
import threading
from itertools import groupby
from pathlib import Path
from typing import Any

import duckdb


def _statements(plan: Path) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(plan.read_text())
    return list(data["statements"])


def run_serial(db: str, plan: Path) -> None:
    con = duckdb.connect(db)
    for st in _statements(plan):
        con.execute(st["sql"])
    con.close()


def run_level(cursors: list[duckdb.DuckDBPyConnection], pending: list[str]) -> None:
    """Execute one level's statements with one thread per cursor pulling from a shared queue."""
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(cur: duckdb.DuckDBPyConnection) -> None:
        while True:
            with lock:
                if not pending or errors:
                    return
                sql = pending.pop(0)
            try:
                cur.execute(sql)
            except BaseException as exc:  # re-raised below: the harness fails loudly on a nonzero exit
                with lock:
                    errors.append(exc)
                return

    threads = [threading.Thread(target=worker, args=(c,)) for c in cursors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def run_two(db: str, plan: Path, workers: int = 2) -> None:
    con = duckdb.connect(db)
    cursors = [con.cursor() for _ in range(workers)]
    for _, group in groupby(_statements(plan), key=lambda st: int(st["level"])):
        run_level(cursors, [st["sql"] for st in group])
    for c in cursors:
        c.close()
    con.close()


def seed(db: str, script: Path) -> None:
    con = duckdb.connect(db)
    for sql in script.read_text().split(";\n"):
        if sql.strip():
            con.execute(sql)
    con.execute("CHECKPOINT")
    con.close()


def count(db: str, plan: Path) -> dict[str, int]:
    con = duckdb.connect(db, read_only=True)
    names = [st["name"] for st in _statements(plan)]
    counts: dict[str, int] = {}
    # Batches of UNION ALL keep the number of round trips low without one giant statement.
    for i in range(0, len(names), 200):
        batch = names[i:i + 200]
        sql = " UNION ALL ".join(f"SELECT '{n}' AS t, count(*) AS c FROM main.{n}" for n in batch)
        for name, rows in con.execute(sql).fetchall():
            counts[str(name)] = int(rows)
    con.close()
    return counts


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in {"serial", "two", "seed", "count"}:
        print(__doc__, file=sys.stderr)
        return 2
    mode, db, path = argv[0], argv[1], Path(argv[2])
    if mode == "serial":
        run_serial(db, path)
    elif mode == "two":
        run_two(db, path)
    elif mode == "seed":
        seed(db, path)
    else:
        json.dump(count(db, path), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
