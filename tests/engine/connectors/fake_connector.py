"""A child connector program for the tests; the manifest picks its behaviour: ``command = ["./prog.py",
"MODE", "key=value", ...]``.

Modes (all read the request from stdin and, unless they fail on purpose, write ``_rocky_result.json``):

ok                 ``rows`` rows (default 3) in ``files`` files (default 1), cursor state + rows
fail_then_ok       exit 3 until ``marker`` (an absolute path) exists, creating it; then ``ok``
wait_then_ok       writes its pid to ``marker``, waits until the file ``go`` exists; then ``ok``
dotdot|absolute|symlink_out   a result path that escapes the scratch directory
lie_bytes|lie_rows a result whose bytes / rows do not match the file
not_parquet        a CSV file listed as Parquet
over_cap           ``size`` bytes of Parquet-looking data (output_bytes is set lower in the test)
fill               keeps writing 64 KiB files until stopped (the 2 s output watchdog must stop it)
ignore_sigterm     traps SIGTERM, writes ``marker``, sleeps forever
sleep              sleeps ``secs`` (default 600) after writing ``marker``
orphan             forks a child that outlives the program (its pid in ``marker``), then ``ok``
forking            forks ``workers`` workers (default 2; the first ignores SIGTERM, the second calls setsid)
                   that keep writing files into the scratch directory; each writes its pid into the
                   directory ``pids``, then the program writes its own pid to ``marker`` and waits forever
print_secret       prints ``$SECRET_NAME``'s value (name in ``name``) on stdout and stderr, then ``ok``
leak_secret        prints ``$NAME``'s value (name in ``name``, a multi-line key) whole and line by line on
                   stdout and stderr, then reports a file named after its second line, which does not exist
big_state          a state value of ``size`` bytes
env                writes its environment, cwd, umask-free scratch mode and rlimits to ``marker`` (JSON)
schema             one file whose columns come from ``cols`` (``name:type,...``; types int|str|float|big)
mixed              two files with different columns
state_version      result state schema_version ``v``
"""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def opts(argv: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv if "=" in a)


def write_table(out: str, name: str, table: pa.Table) -> dict[str, Any]:
    path = os.path.join(out, name)
    pq.write_table(table, path)
    return {"path": name, "bytes": os.path.getsize(path), "rows": table.num_rows}


def cursor_of(request: dict[str, Any]) -> int:
    state = request.get("state")
    return int(state["value"].get("cursor", 0)) if state else 0


def ok_files(request: dict[str, Any], o: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    out = request["output_dir"]
    rows, files = int(o.get("rows", "3")), int(o.get("files", "1"))
    start = cursor_of(request)
    entries = []
    for i in range(files):
        ids = list(range(start + i * rows, start + (i + 1) * rows))
        table = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{x}" for x in ids]})
        entries.append(write_table(out, f"part-{i}.parquet", table))
    return entries, start + rows * files


def finish(request: dict[str, Any], files: list[dict[str, Any]], value: Any, version: int = 1) -> None:
    doc = {"protocol_version": 0, "files": files, "state": {"schema_version": version, "value": value}}
    with open(os.path.join(request["output_dir"], "_rocky_result.json"), "w") as fh:
        json.dump(doc, fh)


def touch(path: str, text: str = "") -> None:
    # Atomic: tests poll for the file and read it at once, so it must never be seen half written.
    partial = f"{path}.partial"
    with open(partial, "w") as fh:
        fh.write(text)
    os.replace(partial, path)


def main() -> int:
    mode, o = sys.argv[1], opts(sys.argv[2:])
    request = json.load(sys.stdin)
    out = request["output_dir"]
    if mode == "fail_then_ok":
        if not os.path.exists(o["marker"]):
            touch(o["marker"])
            print("first attempt fails on purpose", file=sys.stderr)
            return 3
        mode = "ok"
    if mode == "wait_then_ok":
        touch(o["marker"], str(os.getpid()))
        while not os.path.exists(o["go"]):
            time.sleep(0.02)
        mode = "ok"
    if mode == "ok":
        files, cursor = ok_files(request, o)
        finish(request, files, {"cursor": cursor})
        return 0
    if mode in ("dotdot", "absolute", "symlink_out", "lie_bytes", "lie_rows"):
        files, cursor = ok_files(request, o)
        entry = files[0]
        if mode == "dotdot":
            entry["path"] = "../" + os.path.basename(out) + "/" + entry["path"]
        elif mode == "absolute":
            entry["path"] = os.path.join(out, entry["path"])
        elif mode == "symlink_out":
            os.symlink(o["target"], os.path.join(out, "escape.parquet"))
            entry["path"] = "escape.parquet"
            entry["bytes"] = os.path.getsize(o["target"])
        elif mode == "lie_bytes":
            entry["bytes"] += 1
        else:
            entry["rows"] += 1
        finish(request, files, {"cursor": cursor})
        return 0
    if mode == "not_parquet":
        path = os.path.join(out, "data.parquet")
        touch(path, "id,name\n1,a\n2,b\n")
        finish(request, [{"path": "data.parquet", "bytes": os.path.getsize(path), "rows": 2}], {"cursor": 1})
        return 0
    if mode == "over_cap":
        table = pa.table({"blob": [os.urandom(1024).hex() for _ in range(int(o.get("n", "64")))]})
        finish(request, [write_table(out, "big.parquet", table)], {"cursor": 1})
        return 0
    if mode == "fill":
        n = 0
        while True:  # many files, each under RLIMIT_FSIZE: only the 2 s sum can catch them
            with open(os.path.join(out, f"fill-{n}.bin"), "wb") as fh:
                fh.write(b"x" * 65536)
            n += 1
            time.sleep(0.005)
    if mode in ("ignore_sigterm", "sleep"):
        if mode == "ignore_sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if "marker" in o:
            touch(o["marker"], str(os.getpid()))
        time.sleep(float(o.get("secs", "600")))
        return 0
    if mode == "orphan":
        pid = os.fork()
        if pid == 0:
            os.closerange(0, 3)  # a daemon-like child: it does not hold Rocky's pipes
            time.sleep(600)
            os._exit(0)
        touch(o["marker"], str(pid))
        files, cursor = ok_files(request, o)
        finish(request, files, {"cursor": cursor})
        return 0
    if mode == "forking":
        for i in range(int(o.get("workers", "2"))):
            pid = os.fork()
            if pid == 0:
                if i == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                if i == 1:
                    os.setsid()
                touch(os.path.join(o["pids"], f"worker-{i}"), str(os.getpid()))
                n = 0
                while True:
                    touch(os.path.join(out, f"worker-{i}-{n % 5}.tmp"), "x" * 100)
                    n += 1
                    time.sleep(0.05)
        while len(os.listdir(o["pids"])) < int(o.get("workers", "2")):
            time.sleep(0.01)
        touch(o["marker"], str(os.getpid()))
        while True:
            time.sleep(1)
    if mode == "print_secret":
        value = os.environ[o["name"]]
        print(f"the secret is {value} (stdout)")
        print(f"the secret is {value} (stderr)", file=sys.stderr)
        files, cursor = ok_files(request, o)
        finish(request, files, {"cursor": cursor})
        return 0
    if mode == "leak_secret":
        value = os.environ[o["name"]]
        print(f"the key is {value}")
        for line in value.splitlines():
            print(line)
            print(f"line: {line}", file=sys.stderr)
        name = value.splitlines()[1] + ".parquet"
        finish(request, [{"path": name, "bytes": 10, "rows": 1}], {"cursor": 0})
        return 0
    if mode == "big_state":
        finish(request, [], {"blob": "x" * int(o["size"])})
        return 0
    if mode == "env":
        limits = {name: resource.getrlimit(getattr(resource, name))
                  for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE")}
        doc = {
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "mode": stat.S_IMODE(os.stat(out).st_mode),
            "limits": limits,
            "pgid_is_pid": os.getpgrp() == os.getpid(),
            "request": request,
        }
        touch(o["marker"], json.dumps(doc))
        finish(request, [], {"cursor": 0})
        return 0
    if mode == "schema":
        kinds = {"int": pa.int32(), "big": pa.int64(), "str": pa.string(), "float": pa.float64()}
        cols = [c.split(":") for c in o["cols"].split(",")]
        n = int(o.get("rows", "2"))
        arrays = {}
        for name, kind in cols:
            if kind == "str":
                arrays[name] = pa.array([f"v{i}" for i in range(n)], pa.string())
            elif kind == "null":
                arrays[name] = pa.array([None] * n, pa.int64())
            else:
                arrays[name] = pa.array(list(range(n)), kinds[kind])
        finish(request, [write_table(out, "batch.parquet", pa.table(arrays))], {"cursor": 1})
        return 0
    if mode == "mixed":
        a = write_table(out, "a.parquet", pa.table({"id": pa.array([1], pa.int64())}))
        b = write_table(out, "b.parquet", pa.table({"id": pa.array([2], pa.int64()), "x": ["y"]}))
        finish(request, [a, b], {"cursor": 1})
        return 0
    if mode == "reordered":
        a = write_table(out, "a.parquet", pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}))
        b = write_table(out, "b.parquet", pa.table({"name": ["b"], "id": pa.array([2], pa.int64())}))
        finish(request, [a, b], {"cursor": 1})
        return 0
    if mode == "state_version":
        finish(request, [], {"cursor": 1}, version=int(o["v"]))
        return 0
    print(f"unknown mode {mode}", file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main())
