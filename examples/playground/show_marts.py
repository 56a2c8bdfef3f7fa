"""Print the row count of every mart table, the last step of `make demo`."""

from __future__ import annotations

from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent


def main() -> None:
    con = duckdb.connect(str(HERE / "playground.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT table_schema, table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'marts' ORDER BY table_name"
    ).fetchall()
    width = max([len("mart")] + [len(str(r[1])) for r in rows])
    print(f"\n{'mart':<{width}}  {'rows':>8}  kind")
    print(f"{'-' * width}  {'-' * 8}  -----")
    for schema, table, kind in rows:
        count = con.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()
        print(f"{table:<{width}}  {count[0] if count else 0:>8}  {'view' if kind == 'VIEW' else 'table'}")
    con.close()


if __name__ == "__main__":
    main()
