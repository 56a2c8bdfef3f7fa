"""``make mutate``: named mutations of the risky lines, each run against the tests that should catch it.

A mutation is a file, the exact original text (it must occur exactly once), its replacement and the test
paths to run. Each is applied on its own in a temporary copy of the tree (``/tmp/rocky-mutate-*``; the
source tree is never written, so Ctrl-C cannot leave it mutated), with ``PYTHONPATH`` pointing at the copy
so ``rocky`` subprocesses the tests start run the mutated code too. A mutation is *killed* when its tests
fail, *survived* when they pass. The report goes to ``bench/mutation.md``.

Not part of CI (it runs the listed tests once per mutation: minutes). Usage::

    .venv/bin/python bench/mutate.py [NAME ...]     # all mutations, or only the named ones
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "bench" / "mutation.md"
TIMEOUT_S = 900

SCHED = "tests/engine/schedule"
SPOOL_TESTS = (f"{SCHED}/test_spool.py", f"{SCHED}/test_durability.py", f"{SCHED}/test_spool_crash.py")
RECONCILER_TESTS = (
    f"{SCHED}/test_reconciler.py",
    f"{SCHED}/test_two_reconcilers.py",
    f"{SCHED}/test_spool.py",
    f"{SCHED}/test_spool_crash.py",
    f"{SCHED}/test_demand.py",
)
WEBHOOK_TESTS = ("tests/engine/server/test_webhook.py",)


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    #: more (original, replacement) edits in the same file, applied together with the first
    also: tuple[tuple[str, str], ...] = ()

    def edits(self) -> list[tuple[str, str]]:
        return [(self.original, self.replacement), *self.also]


CAS = 'if source == "cron" and current is not None and current.cron_anchor != expected_anchor:'
CLAIM = """                submission_id=submission_id, now=self.rec.clock(),
            ):
                entry.reason, entry.detail = "dedup", f"claim {key} already exists\""""
CLAIM_IGNORED = """                submission_id=submission_id, now=self.rec.clock(),
            ) and False:
                entry.reason, entry.detail = "dedup", f"claim {key} already exists\""""

MUTATIONS: list[Mutation] = [
    # --- the eight breakages of issue 17 ---------------------------------------------------------------
    Mutation(
        "spool-no-file-fsync",
        "rocky_engine/schedule/spool.py",
        '            os.write(fd, (json.dumps(doc.wire(), separators=(",", ":")) + "\\n").encode())\n'
        "            os.fsync(fd)\n",
        '            os.write(fd, (json.dumps(doc.wire(), separators=(",", ":")) + "\\n").encode())\n',
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-no-dir-fsync",
        "rocky_engine/schedule/spool.py",
        "            tmp.unlink(missing_ok=True)\n        _fsync_dir(spool)\n",
        "            tmp.unlink(missing_ok=True)\n",
        SPOOL_TESTS,
    ),
    Mutation("reconciler-no-cas", "rocky_engine/schedule/reconciler.py", CAS, "if False:", RECONCILER_TESTS),
    Mutation(
        "reconciler-claim-conflict-ignored",
        "rocky_engine/schedule/reconciler.py",
        CLAIM,
        CLAIM_IGNORED,
        RECONCILER_TESTS,
    ),
    Mutation(
        "reconciler-no-cas-and-claim-conflict-ignored",
        "rocky_engine/schedule/reconciler.py",
        CAS,
        "if False:",
        RECONCILER_TESTS,
        also=((CLAIM, CLAIM_IGNORED),),
    ),
    Mutation(
        "reconciler-consume-before-claim-commits",
        "rocky_engine/schedule/reconciler.py",
        "        submission_id = uuid.uuid4().hex\n        with self.store.transaction():\n"
        "            claimed = ClaimRepo",
        "        submission_id = uuid.uuid4().hex\n        self._consume(demand)\n"
        "        with self.store.transaction():\n            claimed = ClaimRepo",
        RECONCILER_TESTS,
        also=(
            (
                "        # The claim is committed: removing the file now can only lose the demand, never "
                "repeat it.\n        self._consume(demand)\n",
                "",
            ),
        ),
    ),
    Mutation(
        "postgres-dsn-mask-identity",
        "rocky_engine/adapters/postgres/connection.py",
        'return text.replace(self.password, "***") if self.password else text',
        "return text",
        (
            "tests/engine/adapters/test_postgres_secret_paths.py",
            "tests/engine/adapters/test_postgres_adapter.py",
        ),
    ),
    Mutation(
        "webhook-scrub-identity",
        "rocky_engine/hooks/webhooks.py",
        "    text = text.replace(hook.url, receiver_name(hook.url))\n",
        "    return text\n",
        ("tests/engine/hooks/test_webhook_secret_paths.py", "tests/engine/hooks/test_webhooks.py"),
    ),
    Mutation(
        "runner-no-pipes-report",
        "rocky_engine/run/runner.py",
        "        report_to_pipes(out)\n",
        "",
        ("tests/dagster/test_pipes.py",),
    ),
    # --- more risky lines: schedule/ --------------------------------------------------------------------
    Mutation(
        "spool-consumed-marker-ttl-inverted",
        "rocky_engine/schedule/spool.py",
        "return utc(now).timestamp() - consumed_at < DELIVERY_DEDUPE_TTL.total_seconds()",
        "return utc(now).timestamp() - consumed_at > DELIVERY_DEDUPE_TTL.total_seconds()",
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-duplicate-link-accepted",
        "rocky_engine/schedule/spool.py",
        '        except FileExistsError:\n            return SpoolWrite("duplicate", None, final)\n',
        '        except FileExistsError:\n            return SpoolWrite("accepted", uid, final)\n',
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-unreadable-demand-skipped",
        "rocky_engine/schedule/spool.py",
        '            listing.errors.append(f"cannot read webhook demand {path}: {detail}")',
        "            pass",
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-unreadable-dir-is-empty",
        "rocky_engine/schedule/spool.py",
        '        listing.errors.append(f"cannot read the webhook spool {spool}: {exc.strerror or exc}")',
        "        pass",
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-consume-no-dedupe-marker",
        "rocky_engine/schedule/spool.py",
        '            marker.write_text(rfc3339(now) + "\\n", encoding="utf-8")\n'
        "            stamp = utc(now).timestamp()\n            os.utime(marker, (stamp, stamp))\n",
        "",
        SPOOL_TESTS,
    ),
    Mutation(
        "spool-consume-no-dir-fsync",
        "rocky_engine/schedule/spool.py",
        "        demand.path.unlink(missing_ok=True)\n        _fsync_dir(spool)\n",
        "        demand.path.unlink(missing_ok=True)\n",
        SPOOL_TESTS,
    ),
    Mutation(
        "tick-lock-never-stale",
        "rocky_engine/schedule/tick_lock.py",
        "if age > self.stale_after:",
        "if False:",
        (f"{SCHED}/test_tick_lock.py", f"{SCHED}/test_reconciler.py", f"{SCHED}/test_two_reconcilers.py"),
    ),
    Mutation(
        "tick-lock-always-stale",
        "rocky_engine/schedule/tick_lock.py",
        "if age > self.stale_after:",
        "if True:",
        (f"{SCHED}/test_tick_lock.py", f"{SCHED}/test_reconciler.py"),
    ),
    Mutation(
        "claims-resolve-at-once",
        "rocky_engine/schedule/claim_lifecycle.py",
        "if now - claim.updated_at >= resolve_after:",
        "if True:",
        RECONCILER_TESTS,
    ),
    Mutation(
        "reconciler-in-flight-ignored",
        "rocky_engine/schedule/reconciler.py",
        'if source != "cron" and claims.submitted(pp.name):',
        "if False:",
        RECONCILER_TESTS,
    ),
    Mutation(
        "incidents-no-file-fsync",
        "rocky_engine/schedule/incidents.py",
        "                os.write(fd, data)\n                os.fsync(fd)\n",
        "                os.write(fd, data)\n",
        (f"{SCHED}/test_durability.py", f"{SCHED}/test_incidents.py"),
    ),
    Mutation(
        "incidents-prune-keeps-oldest",
        "rocky_engine/schedule/incidents.py",
        "for name in names[: max(0, len(names) - keep)]:",
        "for name in names[keep:]:",
        (f"{SCHED}/test_incidents.py",),
    ),
    Mutation(
        "incidents-follow-symlinks",
        "rocky_engine/schedule/incidents.py",
        "os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
        "os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC",
        (f"{SCHED}/test_incidents.py",),
    ),
    Mutation(
        "backoff-never",
        "rocky_engine/schedule/backoff.py",
        'return Backoff("failure_backoff", resume) if now < resume else None',
        "return None",
        (f"{SCHED}/test_reconciler.py",),
    ),
    Mutation(
        "backoff-partial-never",
        "rocky_engine/schedule/backoff.py",
        'return Backoff("partial_backoff", resume) if now < resume else None',
        "return None",
        (f"{SCHED}/test_reconciler.py",),
    ),
    # --- state/ -----------------------------------------------------------------------------------------
    Mutation(
        "state-synchronous-normal",
        "rocky_engine/state/store.py",
        'conn.execute("PRAGMA synchronous = FULL")',
        'conn.execute("PRAGMA synchronous = NORMAL")',
        ("tests/engine/state/test_state_durability.py",),
    ),
    Mutation(
        "state-claim-conflict-overwrites",
        "rocky_engine/state/schedule_claims.py",
        "ON CONFLICT (claim_key) DO NOTHING",
        "ON CONFLICT (claim_key) DO UPDATE SET submission_id = excluded.submission_id",
        RECONCILER_TESTS,
    ),
    Mutation(
        "state-connector-fence-off",
        "rocky_engine/state/connectors.py",
        "if current != expected_seq:",
        "if False:",
        ("tests/engine/connectors/test_crash.py",),
    ),
    Mutation(
        "state-idempotency-claim-never-expires",
        "rocky_engine/state/idempotency_decision.py",
        "if utc(now) < utc(entry.expires_at):",
        "if True:",
        ("tests/engine/state/test_state_idempotency.py", "tests/engine/state/test_idempotency_decision.py"),
    ),
    # --- server/webhook* and server/signatures.py --------------------------------------------------------
    Mutation(
        "signature-any-rocky-signature",
        "rocky_engine/server/signatures.py",
        '    if not matched:\n        return Verdict(False, "rocky", reason="X-Rocky-Signature does not '
        'match the body")\n',
        "",
        WEBHOOK_TESTS,
    ),
    Mutation(
        "signature-replay-window-off",
        "rocky_engine/server/signatures.py",
        "if abs(now - sent) > TOLERANCE_SECONDS:",
        "if False:",
        WEBHOOK_TESTS,
    ),
    Mutation(
        "signature-standard-any",
        "rocky_engine/server/signatures.py",
        '    if not matched:\n        return Verdict(False, "standard", reason="webhook-signature does not '
        'match the request")\n',
        "",
        WEBHOOK_TESTS,
    ),
    Mutation(
        "webhook-rate-limit-off",
        "rocky_engine/server/webhook.py",
        "    if wait > 0:\n",
        "    if False:\n",
        WEBHOOK_TESTS,
    ),
    Mutation(
        "webhook-unsigned-from-a-browser",
        "rocky_engine/server/webhook.py",
        "if not settings.webhook_secrets and _from_a_browser(request):",
        "if False:",
        (*WEBHOOK_TESTS, "tests/engine/server/test_guard.py"),
    ),
    # --- connectors/ ------------------------------------------------------------------------------------
    Mutation(
        "connector-redactor-off",
        "rocky_engine/connectors/launch.py",
        '                text = text.replace(value, "${" + name + "}")\n',
        "                pass\n",
        ("tests/engine/connectors/test_launch.py", "tests/engine/connectors/test_run.py"),
    ),
    Mutation(
        "connector-contract-min-rows-off",
        "rocky_engine/connectors/contract.py",
        "if contract.min_rows is not None and rows < contract.min_rows:",
        "if False:",
        ("tests/engine/connectors/test_promote.py",),
    ),
    Mutation(
        "connector-contract-not-null-off",
        "rocky_engine/connectors/contract.py",
        "            if nulls:\n",
        "            if False:\n",
        ("tests/engine/connectors/test_promote.py",),
    ),
    # --- run/idempotency* -------------------------------------------------------------------------------
    Mutation(
        "run-idempotency-finalize-always-succeeded",
        "rocky_engine/run/idempotency.py",
        "    backend.finalize(key, run_id, succeeded, now)",
        "    backend.finalize(key, run_id, True, now)",
        (
            "tests/engine/run/test_idempotency_peek.py",
            "tests/engine/run/test_idempotency_resume.py",
            "tests/engine/state/test_state_idempotency.py",
        ),
    ),
    Mutation(
        "run-idempotency-peek-never-skips",
        "rocky_engine/run/idempotency.py",
        "            return None if decision.proceed else decision",
        "            return None",
        ("tests/engine/run/test_idempotency_peek.py",),
    ),
]


@dataclass
class Result:
    mutation: Mutation
    verdict: str
    seconds: float
    detail: str


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns(
        ".git",
        ".venv*",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".dagster-home",
        "work",
        "*.duckdb",
    )
    shutil.copytree(REPO, dest, ignore=ignore, symlinks=True)


def _pytest(root: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "python"),
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            *tests,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return proc.returncode, lines[-1] if lines else proc.stderr.strip()[-200:]


def _apply(root: Path, m: Mutation) -> str:
    path = root / m.file
    text = path.read_text()
    for original, replacement in m.edits():
        count = text.count(original)
        if count != 1:
            raise SystemExit(f"mutation {m.name}: the original text occurs {count} times in {m.file}")
        text = text.replace(original, replacement)
    path.write_text(text)
    return (REPO / m.file).read_text()


def run(selected: list[Mutation]) -> list[Result]:
    results: list[Result] = []
    root = Path(tempfile.mkdtemp(prefix="rocky-mutate-"))
    root.chmod(0o755)  # tests that drop root to nobody must still import the mutated copy
    try:
        tree = root / "tree"
        _copy_tree(tree)
        union = tuple(sorted({t for m in selected for t in m.tests}))
        code, last = _pytest(tree, union)
        if code != 0:
            raise SystemExit(f"the unmutated tests fail ({last}); fix them before mutating")
        for m in selected:
            pristine = _apply(tree, m)
            t0 = time.monotonic()
            try:
                code, last = _pytest(tree, m.tests)
            except subprocess.TimeoutExpired:
                code, last = 1, f"timed out after {TIMEOUT_S} s"
            finally:
                (tree / m.file).write_text(pristine)  # the copy is restored for the next mutation
            verdict = "survived" if code == 0 else "killed"
            results.append(Result(m, verdict, time.monotonic() - t0, last))
            print(f"{verdict:9} {m.name} ({time.monotonic() - t0:.0f} s): {last}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def report(results: list[Result], seconds: float) -> str:
    killed = sum(r.verdict == "killed" for r in results)
    lines = [
        "# Mutation check (`make mutate`, bench/mutate.py)",
        "",
        f"Score: **{killed}/{len(results)} killed** ({100 * killed / max(1, len(results)):.0f} %); "
        f"run time {seconds / 60:.1f} min on this machine.",
        "",
        "Each named mutation is applied alone to a temporary copy of the tree and the listed tests are run "
        "(`-x`). Survivors are explained below the table.",
        "",
        "| mutation | file | result | s | tests | last line |",
        "|---|---|---|---:|---|---|",
    ]
    for r in results:
        tests = ", ".join(t.removeprefix("tests/engine/") for t in r.mutation.tests)
        detail = r.detail.replace("|", "\\|")
        lines.append(
            f"| {r.mutation.name} | `{r.mutation.file}` | {r.verdict} | {r.seconds:.0f} | {tests} | "
            f"{detail} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    # SIGTERM unwinds like Ctrl-C: the temporary copy is removed and the running pytest is killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    by_name = {m.name: m for m in MUTATIONS}
    unknown = [n for n in argv if n not in by_name]
    if unknown:
        print(f"unknown mutation(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    selected = [by_name[n] for n in argv] if argv else MUTATIONS
    t0 = time.monotonic()
    results = run(selected)
    text = report(results, time.monotonic() - t0)
    if not argv:
        survivors = REPORT.read_text().split("## Survivors", 1) if REPORT.exists() else []
        REPORT.write_text(text + ("\n## Survivors" + survivors[1] if len(survivors) == 2 else ""))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
