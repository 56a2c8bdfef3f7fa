"""The PostgreSQL source of the replication-peers workload: a real server, its tables, the +1% appends.

The server is the test suite's (`tests/fixtures/postgres.py`: initdb as the `postgres` user in a temp dir, a
free port on 127.0.0.1, scram over TCP, fsync off), so the bench and the tests start PostgreSQL one way.

Two databases, both with `timezone = 'America/New_York'` as their default, so a reader that turns
`timestamptz` into the session's wall-clock time instead of a UTC instant fails verification:

- `bench_big`: `src__big.events`, 2,000,000 rows;
- `bench_small`: 20 schemas `src__s00..s19` x 10 tables `t00..t09`, 10,000 rows each.

Every table has the same ten columns (see `COLUMNS`); `updated_at` grows with `id` and has microseconds, and
`note` is NULL on every tenth row. The second pass appends 1% new rows (ids and timestamps after every
existing one); `reset` deletes them again and vacuums, so the next configuration reads the same source.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
from tests.fixtures.postgres import PgServer, _ensure_binaries, free_port  # noqa: E402

TIMEZONE = "America/New_York"
BIG_ROWS = 2_000_000
SMALL_SCHEMAS, SMALL_TABLES, SMALL_ROWS = 20, 10, 10_000

COLUMNS = """
    id bigint PRIMARY KEY,
    qty integer NOT NULL,
    amount numeric(12,2) NOT NULL,
    score double precision NOT NULL,
    name text NOT NULL,
    code varchar(16) NOT NULL,
    active boolean NOT NULL,
    day date NOT NULL,
    updated_at timestamptz NOT NULL,
    note text
"""


def _rows(table: str, start: int, stop: int, salt: int = 0) -> str:
    """Rows `start..stop` (inclusive) of a table, deterministic; amounts up to 99,999,999.99."""
    return f"""INSERT INTO {table}
SELECT g, ((g * 7 + {salt}) % 1000)::int,
       (((g * 7919 + {salt}) % 10000000000) / 100.0)::numeric(12,2),
       (g % 100003) / 7.0,
       'customer ' || g || ' of {salt}',
       'C' || lpad(((g * 31) % 100000)::text, 6, '0'),
       g % 3 = 0,
       DATE '2020-01-01' + (g % 2000)::int,
       TIMESTAMPTZ '2026-01-01 00:00:00+00' + g * INTERVAL '1 second' + (g % 997) * INTERVAL '1 microsecond',
       CASE WHEN g % 10 = 0 THEN NULL ELSE 'note ' || (g % 77) END
FROM generate_series({start}::bigint, {stop}::bigint) AS g"""


@dataclass(frozen=True)
class Source:
    """One source database and its tables."""

    dbname: str
    tables: tuple[str, ...]  # "schema.table"
    rows: int  # per table
    new_rows: int  # appended per table before a second pass


BIG = Source("bench_big", ("src__big.events",), BIG_ROWS, BIG_ROWS // 100)
SMALL = Source(
    "bench_small",
    tuple(f"src__s{s:02d}.t{t:02d}" for s in range(SMALL_SCHEMAS) for t in range(SMALL_TABLES)),
    SMALL_ROWS, SMALL_ROWS // 100,
)


class SourceServer:
    """A PostgreSQL 15 server with the two source databases, seeded once."""

    def __init__(self) -> None:
        root = Path(tempfile.mkdtemp(prefix="rocky-bench-pg-"))
        self.server = PgServer(bin_dir=_ensure_binaries(), root=root, port=free_port())

    def start(self) -> None:
        self.server.init()
        self.server.start()
        self.server.bootstrap()
        for source in (BIG, SMALL):
            self.server.create_database(source.dbname)
            self.server.admin_sql(f"ALTER DATABASE {source.dbname} SET timezone TO '{TIMEZONE}'")

    def stop(self) -> None:
        if self.server.running:
            self.server.stop("fast")
        shutil.rmtree(self.server.root, ignore_errors=True)

    @property
    def password(self) -> str:
        return self.server.password

    def uri(self, dbname: str) -> str:
        s = self.server
        return f"postgresql://{s.user}:{s.password}@{s.host}:{s.port}/{dbname}"

    def version(self) -> str:
        return str(self._sql(BIG.dbname, "SHOW server_version")[0][0])

    def _sql(self, dbname: str, *statements: str) -> list[tuple[Any, ...]]:
        import psycopg

        rows: list[tuple[Any, ...]] = []
        with psycopg.connect(self.server.conninfo(dbname), autocommit=True) as conn:
            for sql in statements:
                cur = conn.execute(sql)
                rows = cur.fetchall() if cur.description is not None else []
        return rows

    def seed(self, source: Source) -> None:
        stmts: list[str] = []
        for schema in sorted({t.split(".")[0] for t in source.tables}):
            stmts.append(f"CREATE SCHEMA {schema}")
        for n, table in enumerate(source.tables):
            stmts += [f"CREATE TABLE {table} ({COLUMNS})", _rows(table, 1, source.rows, n),
                      f"CREATE INDEX ON {table} (updated_at)"]
        stmts.append("VACUUM ANALYZE")
        self._sql(source.dbname, *stmts)

    def append(self, source: Source) -> None:
        """The second pass's new rows: 1% per table, every id and `updated_at` after the existing ones."""
        self._sql(source.dbname, *[_rows(t, source.rows + 1, source.rows + source.new_rows, n)
                                   for n, t in enumerate(source.tables)])

    def reset(self, source: Source) -> None:
        """Remove the appended rows again, so the next configuration reads exactly the seeded tables."""
        self._sql(source.dbname, *[f"DELETE FROM {t} WHERE id > {source.rows}" for t in source.tables],
                  "VACUUM ANALYZE")
