#!/usr/bin/env python3
"""Reference child connector: one PostgreSQL table, incrementally, by a timestamp cursor.

One Python 3.8+ file with no packages. The SQL runs in the ``duckdb`` CLI with DuckDB's postgres extension
(pip ``duckdb-cli`` and ``duckdb-extension-postgres`` at the same version install both offline). The
connection settings are the PG* variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE), declared under
``secrets`` in rocky.toml: ``ATTACH '' AS pg (TYPE postgres)`` lets libpq read them from the environment,
so they never appear in SQL, arguments or output.

Each run (seeds/child-connectors.md "Reference connector"):

1. reads the rows whose cursor value is above the saved cursor (all rows on the first run; NULLs
   skipped) in one query, and the maximum M of those values, in UTC;
2. writes the rows below M to one Parquet file: rows at M wait for a newer row, so rows that tie at M
   always land together;
3. saves the largest value written as the new cursor; with no qualifying row it writes no file and keeps
   the cursor.

Usage (the manifest's ``command``)::

    ["./pg_connector.py", "--table", "public.events", "--cursor-column", "updated_at"]

Options: ``--duckdb PATH`` (default: ``duckdb`` on PATH), ``--extension PATH`` (default: the
``duckdb_extension_postgres`` package next to that duckdb), ``--file-name NAME`` (default
``<table>.parquet``).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

STATE_SCHEMA_VERSION = 1
PROTOCOL_VERSION = 0
CURSOR_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_CURSOR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class ConnectorFailure(Exception):
    """A failure worth one line on stderr and a non-zero exit."""


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Rocky child connector for one PostgreSQL table")
    parser.add_argument("--table", required=True, help="schema.table to read (schema defaults to public)")
    parser.add_argument("--cursor-column", required=True, help="timestamp column that only grows")
    parser.add_argument("--duckdb", default="duckdb", help="the duckdb CLI (default: duckdb on PATH)")
    parser.add_argument("--extension", help="postgres.duckdb_extension file (default: found next to duckdb)")
    parser.add_argument("--file-name", help="name of the Parquet file (default: <table>.parquet)")
    return parser.parse_args(argv)


def quote_ident(name):
    return '"' + name.replace('"', '""') + '"'


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def which(program):
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def duckdb_version(duckdb):
    done = subprocess.run([duckdb, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"v(\d+\.\d+\.\d+)", done.stdout)
    return match.group(1) if match else None


def find_extension(duckdb, version):
    """The extension file of the ``duckdb_extension_postgres`` package installed beside ``duckdb``.

    Handles the pip layouts: ``site-packages/duckdb_cli/duckdb`` (the binary), ``<venv>/bin/duckdb``
    (pip's launcher script) and ``pip install --target DIR``.
    """
    here = os.path.dirname(os.path.realpath(duckdb))
    roots = [os.path.dirname(here)]
    roots += glob.glob(os.path.join(here, "..", "lib", "python*", "site-packages"))
    found = []
    for root in roots:
        found += glob.glob(os.path.join(root, "duckdb_extension_postgres", "extensions", "v*",
                                        "postgres.duckdb_extension"))
    if version is not None:
        matching = [f for f in found if os.sep + "v" + version + os.sep in f]
        found = matching or found
    return os.path.abspath(found[0]) if found else None


def link_extension(extension, scratch):
    """DuckDB derives the entry point from the file name: the file must be postgres_scanner.*"""
    directory = os.path.join(scratch, ".duckdb-extension")
    os.makedirs(directory, exist_ok=True)
    link = os.path.join(directory, "postgres_scanner.duckdb_extension")
    try:
        os.symlink(extension, link)
    except OSError:
        import shutil

        shutil.copyfile(extension, link)
    return link


def read_cursor(state):
    if state is None:
        return None
    version = state.get("schema_version")
    if version != STATE_SCHEMA_VERSION:
        raise ConnectorFailure(
            f"state schema_version {version!r} is not {STATE_SCHEMA_VERSION}, the only one this connector "
            "knows"
        )
    cursor = (state.get("value") or {}).get("cursor")
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not _CURSOR.match(cursor):
        raise ConnectorFailure(f"saved cursor {cursor!r} is not of the form YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return cursor


def build_sql(extension, table, column, cursor, out_file):
    schema, _, name = table.rpartition(".")
    source = f"pg.{quote_ident(schema or 'public')}.{quote_ident(name)}"
    col = f"CAST({quote_ident(column)} AS TIMESTAMPTZ)"
    above = "" if cursor is None else f" AND {col} > TIMESTAMPTZ {sql_string(cursor)}"
    return "\n".join([
        "SET autoinstall_known_extensions = false;",
        "SET autoload_known_extensions = false;",
        "SET TimeZone = 'UTC';",
        f"LOAD {sql_string(extension)};",
        "ATTACH '' AS pg (TYPE postgres, READ_ONLY);",
        # One query reads the candidate rows, so M and the rows come from the same snapshot.
        f"CREATE TEMP TABLE candidates AS SELECT * FROM {source} "
        f"WHERE {quote_ident(column)} IS NOT NULL{above};",
        "CREATE TEMP TABLE batch AS SELECT * FROM candidates "
        f"WHERE {col} < (SELECT max({col}) FROM candidates);",
        f"COPY batch TO {sql_string(out_file)} (FORMAT parquet);",
        f"SELECT count(*) AS n_rows, strftime(max({col}), {sql_string(CURSOR_FORMAT)}) AS new_cursor "
        "FROM batch;",
    ]) + "\n"


def run_duckdb(duckdb, sql, scratch):
    done = subprocess.run([duckdb, "-json", "-bail", ":memory:"], input=sql, cwd=scratch,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise ConnectorFailure(f"duckdb exited with code {done.returncode}: {detail}")
    arrays = re.findall(r"\[\{.*?\}\]", done.stdout, flags=re.S)
    if not arrays:
        raise ConnectorFailure(f"duckdb printed no result row: {done.stdout.strip()[:500]}")
    return json.loads(arrays[-1])[0]


def main(argv):
    args = parse_args(argv)
    request = json.load(sys.stdin)
    if request.get("protocol_version") != PROTOCOL_VERSION:
        raise ConnectorFailure(f"request protocol_version {request.get('protocol_version')!r} is not 0")
    scratch = request["output_dir"]
    cursor = read_cursor(request.get("state"))
    duckdb = which(args.duckdb)
    if duckdb is None:
        raise ConnectorFailure(
            f"the duckdb CLI {args.duckdb!r} was not found on PATH (pip install duckdb-cli)"
        )
    extension = args.extension or find_extension(duckdb, duckdb_version(duckdb))
    if extension is None or not os.path.isfile(extension):
        raise ConnectorFailure("the DuckDB postgres extension was not found; pass --extension PATH or "
                               "pip install duckdb-extension-postgres next to duckdb-cli")
    table_name = args.table.rpartition(".")[2]
    file_name = args.file_name or f"{table_name}.parquet"
    if not _NAME.match(file_name):
        raise ConnectorFailure(f"--file-name {file_name!r} must be a plain file name")
    out_file = os.path.join(scratch, file_name)
    sql = build_sql(link_extension(extension, scratch), args.table, args.cursor_column, cursor, out_file)
    summary = run_duckdb(duckdb, sql, scratch)
    rows = int(summary["n_rows"])
    files = []
    if rows == 0:
        os.remove(out_file)  # no qualifying row: no file, and the cursor stays where it was
        print(f"no new rows below the newest {args.cursor_column} value; cursor stays at {cursor}")
    else:
        cursor = summary["new_cursor"]
        files.append({"path": file_name, "bytes": os.path.getsize(out_file), "rows": rows})
        print(f"extracted {rows} rows from {args.table}; cursor now {cursor}")
    result = {
        "protocol_version": PROTOCOL_VERSION,
        "files": files,
        "state": {"schema_version": STATE_SCHEMA_VERSION, "value": {"cursor": cursor}},
    }
    with open(os.path.join(scratch, "_rocky_result.json"), "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ConnectorFailure as exc:
        sys.stderr.write(f"pg_connector: {exc}\n")
        sys.exit(2)
