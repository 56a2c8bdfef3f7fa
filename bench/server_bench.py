"""`rocky serve` budgets (issue 7), measured against a real server process over 127.0.0.1.

1. Signed webhook acceptance with the rate limit raised out of the way: ``--requests`` POSTs with distinct
   bodies, each signed (X-Rocky-Signature) and durably spooled (temp file, fsync, link, directory fsync)
   before its 202, from ``--concurrency`` keep-alive clients. Budget: at least 300 accepted demands/s and
   a p99 latency under 50 ms.
2. ``GET /api/v1/schedule`` over a project of 1,000 scheduled pipelines (the generator of
   ``tick_bench.py``, anchored by one real tick so every pipeline has its cursor row), sequentially.
   Budget: p99 under 100 ms.

The client runs on the same two cores as the server, so the figures include its cost. Bytecode caching is
on for the server (``harness.child_env``). ``make bench`` runs this as the ``server`` workload of run_bench.

    .venv/bin/python bench/server_bench.py [--requests 3000] [--concurrency 8] [--gets 300] [--work-dir DIR]
                                           [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BENCH_DIR, ROCKY, child_env
from suites import Figure, SuiteResult, write
from tick_bench import ANCHOR, _iso, generate_project

SECRET = "bench-secret"
ONE_PIPELINE = """\
[adapter]
type = "duckdb"
path = "bench.duckdb"

[pipeline.orders]
type = "transformation"
models = "models/**"
"""


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


class Server:
    """``rocky serve --port 0`` in ``root``; the URL comes from its listening log line."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = root / "serve.log"
        full_env = child_env()
        full_env.update(env or {})
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(ROCKY), "serve", "--port", "0", *args], cwd=root, env=full_env,
                stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 60
        self.port = 0
        while not self.port:
            text = self.log.read_text(errors="replace")
            if "listening on http://127.0.0.1:" in text:
                self.port = int(text.split("listening on http://127.0.0.1:", 1)[1].split()[0])
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rocky serve did not start:\n{text[-3000:]}")
            else:
                time.sleep(0.05)

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


def bench_webhooks(work: Path, requests: int, concurrency: int) -> dict[str, float]:
    root = work / "webhooks"
    shutil.rmtree(root, ignore_errors=True)
    (root / "models").mkdir(parents=True)
    (root / "rocky.toml").write_text(ONE_PIPELINE, encoding="utf-8")
    (root / "models" / "good.sql").write_text("select 1 as x\n", encoding="utf-8")
    server = Server(root, "--scheduler", "--poll-interval-seconds", "3600", "--webhook-rate", "1000000",
                    "--webhook-burst", "1000000", env={"ROCKY_WEBHOOK_SECRET": SECRET})
    try:
        time.sleep(0.5)  # the startup tick
        latencies: list[float] = []
        statuses: list[int] = []
        lock = threading.Lock()
        counter = iter(range(requests))
        counter_lock = threading.Lock()

        def worker() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            mine: list[tuple[int, float]] = []
            while True:
                with counter_lock:
                    i = next(counter, None)
                if i is None:
                    break
                body = f'{{"event": "sync_complete", "n": {i}}}'.encode()
                sig = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                t0 = time.perf_counter()
                conn.request("POST", "/api/v1/hooks/trigger/orders", body=body,
                             headers={"X-Rocky-Signature": sig, "Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                mine.append((response.status, time.perf_counter() - t0))
            conn.close()
            with lock:
                for status, latency in mine:
                    statuses.append(status)
                    latencies.append(latency)

        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        spooled = len(list((root / ".rocky" / "pending-demands").glob("*.json")))
    finally:
        server.stop()
    accepted = statuses.count(202)
    if accepted != requests or spooled != requests:
        raise RuntimeError(f"expected {requests} accepted and spooled, got {accepted} / {spooled}")
    return {
        "requests": requests,
        "concurrency": concurrency,
        "wall_s": wall,
        "accepted_per_s": accepted / wall,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
    }


def bench_schedule(work: Path, gets: int, pipelines: int) -> dict[str, float]:
    root = work / "schedule"
    config = generate_project(root, pipelines, pipelines)
    subprocess.run(
        [str(ROCKY), "-c", str(config), "tick", "--now", _iso(ANCHOR), "--output", "json"],
        cwd=root, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )
    server = Server(root)
    try:
        status, body = server.get("/api/v1/schedule")
        if status != 200 or body.count(b'"pipeline":') < pipelines:
            raise RuntimeError(f"GET /api/v1/schedule answered {status}: {body[:500]!r}")
        for _ in range(5):
            server.get("/api/v1/schedule")
        latencies = []
        for _ in range(gets):
            t0 = time.perf_counter()
            status, body = server.get("/api/v1/schedule")
            latencies.append(time.perf_counter() - t0)
            assert status == 200
    finally:
        server.stop()
    return {
        "pipelines": pipelines,
        "gets": gets,
        "bytes": len(body),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
    }


def suite(hooks: dict[str, float], schedule: dict[str, float]) -> SuiteResult:
    requests, clients = int(hooks["requests"]), int(hooks["concurrency"])
    figures = [
        Figure("signed webhook acceptance", hooks["accepted_per_s"], "/s", ">=", 300.0,
               detail=f"{requests:,} requests in {hooks['wall_s']:.2f} s, {clients} keep-alive clients"),
        Figure("signed webhook latency p99", hooks["p99_ms"], "ms", "<", 50.0,
               detail=f"p50 {hooks['p50_ms']:.1f} ms, max {hooks['max_ms']:.1f} ms"),
        Figure(f"GET /api/v1/schedule over {int(schedule['pipelines']):,} pipelines, p99", schedule["p99_ms"],
               "ms", "<", 100.0,
               detail=f"{int(schedule['gets'])} GETs; p50 {schedule['p50_ms']:.1f} ms, max "
               f"{schedule['max_ms']:.1f} ms; {int(schedule['bytes']):,} bytes"),
    ]
    return SuiteResult(
        "server", "`rocky serve`: webhook ingress and the schedule API (issue 7)",
        "A real `rocky serve --port 0` process on 127.0.0.1 (bytecode caching on). Webhooks: a one-pipeline "
        f"project served with `--scheduler` and the rate limit raised out of the way; {requests:,} POSTs to "
        f"`/api/v1/hooks/trigger/orders` with distinct bodies, each HMAC-signed (X-Rocky-Signature), from "
        f"{clients} keep-alive client threads; every demand is spooled durably (temp file, fsync, link, "
        "directory fsync) before its 202, and afterwards all must be 202 and all spooled. Schedule: the "
        f"generated project of the tick workload ({int(schedule['pipelines']):,} scheduled pipelines), "
        "anchored by one real tick, then sequential GETs on a fresh connection each, after 5 untimed ones. "
        "The clients share the machine's two cores with the server, so the figures include their cost.",
        figures=figures,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--gets", type=int, default=300)
    parser.add_argument("--pipelines", type=int, default=1000)
    parser.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work" / "server")
    parser.add_argument("--json", type=Path, help="also write the figures here (run_bench reads them)")
    args = parser.parse_args()
    args.work_dir = args.work_dir.resolve()  # children run in other directories
    args.work_dir.mkdir(parents=True, exist_ok=True)
    hooks = bench_webhooks(args.work_dir, args.requests, args.concurrency)
    schedule = bench_schedule(args.work_dir, args.gets, args.pipelines)
    result = suite(hooks, schedule)
    print(write(args.json, result))
    return 0 if all(f.passed() is not False for f in result.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
