"""Fuzzing the state file (issue 13, "Done when"): random corruption never reaches a user as a traceback.

A seeded generator damages a real store (full of runs, progress, checks, watermarks, schedule cursors,
claims and jobs) in ways a disk, a copy or a person can: random 50-byte overwrites anywhere, overwrites of
stored values and of page headers, truncation, garbage written into a random column through SQLite
itself. Every command that opens the store then runs on it, doctor included, in this process through the
CLI's entry point. Each must end the documented way: no traceback, no "internal error", no hang, exit 0
or a one-line error (``state store at P is damaged: ...`` with the ``mv`` fix when the file is at fault),
and ``rocky doctor`` Critical whenever ``history`` or ``state`` found the store damaged. A few cases are
replayed through real ``rocky`` processes.

Reproduce a failure with ``ROCKY_FUZZ_SEED=<seed>``; ``ROCKY_FUZZ_CASES`` sets the number of corruptions.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.state import ModelExecution, ProgressEntry, RunRecord, StateStore
from rocky_engine.state.schedule import ScheduleRepo, ScheduleRow
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.fixtures.inprocess import InProcess, assert_no_traceback, rocky_in_process
from tests.fixtures.projects import TRANSFORMATION_TOML, run_rocky

SEED = int(os.environ.get("ROCKY_FUZZ_SEED", "20261313"))
CASES = int(os.environ.get("ROCKY_FUZZ_CASES", "40"))
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
NOW = "2026-03-02T09:00:00Z"

#: every command that opens the store (argv after -c CONFIG) and the exit codes it may give; the writers
#: come last, since they change the file
READERS: list[tuple[list[str], frozenset[int]]] = [
    (["history"], frozenset({0, 1})),
    (["history", "--audit", "--status", "Failure"], frozenset({0, 1})),
    (["history", "--model", "m"], frozenset({0, 1})),
    (["state"], frozenset({0, 1})),
    (["doctor", "--now", NOW], frozenset({0, 3})),
    (["brief", "--since", "7d", "--now", NOW], frozenset({0, 1})),
    (["tick", "--dry-run", "--now", NOW], frozenset({0, 1, 2})),
]
WRITERS: list[tuple[list[str], frozenset[int]]] = [
    (["tick", "--now", NOW], frozenset({0, 1, 2})),
    (["run", "--pipeline", "models"], frozenset({0, 1, 2})),
]
_LOG_LINE = re.compile(r'^(error|warning|info|debug): |^\{"ts": ')
_TEXT = re.compile(rb"run-2026|2026-0[23]-0[12]T|Success|Failure|models|wh\.main|\{\"|\[\{")


def _build(root: Path) -> tuple[Path, Path, bytes]:
    """A project whose store holds something in every table; returns (config, store, its bytes)."""
    config = root / "rocky.toml"
    config.write_text(
        TRANSFORMATION_TOML.format(pipeline="models") + '\n[pipeline.models.schedule]\ncron = "0 * * * *"\n'
    )
    (root / "models").mkdir()
    (root / "models" / "m.sql").write_text("select 1 as a\n")
    store = root / "models" / ".rocky-state.db"
    with StateStore.open(store) as s:
        runs = []
        for i in range(30):
            start = T0 + timedelta(minutes=7 * i)
            runs.append(RunRecord(
                run_id=f"run-20260301-{8 + i // 8:02d}{(7 * i) % 60:02d}00-000", pipeline="models",
                started_at=start, finished_at=start + timedelta(seconds=3),
                status=("Success", "PartialFailure", "Failure")[i % 3],
                trigger=("Manual", "Schedule")[i % 2], submission_id=f"sub{i}", exit_code=(0, 2, 1)[i % 3],
                models_executed=[ModelExecution(model_name="m", started_at=start, duration_ms=12,
                                                rows_affected=i, status="success")],
                extra={"tables_skipped": i},
            ))
        s.runs.insert_many(runs)
        s.watermarks.set_many({f"wh.main.t{i}": f"2026-03-01 0{i % 10}:00:00" for i in range(20)}, now=T0)
        s.progress.record_many(
            runs[0].run_id, [ProgressEntry(f"wh.main.t{i}", "success", i, None) for i in range(10)],
            pipeline="models", now=T0,
        )
        ScheduleRepo(s).upsert_many([ScheduleRow(
            pipeline="models", cron="0 * * * *", timezone="UTC", cron_anchor=T0, last_fire=T0,
            last_fire_source="cron", last_outcome="success", last_evaluated_at=T0, next_fire_at=T0,
        )])
        ClaimRepo(s).submit(claim_key="models|cron|x", pipeline="models", source="cron", logical_ts=T0,
                            submission_id="sub-open", now=T0)
        s.query("PRAGMA wal_checkpoint(TRUNCATE)")
    return config, store, store.read_bytes()


def _corrupt(rng: random.Random, store: Path, good: bytes) -> str:
    """Damage the store one way; returns what was done (for the failure message)."""
    for suffix in ("-wal", "-shm"):
        store.with_name(store.name + suffix).unlink(missing_ok=True)
    data = bytearray(good)
    how = rng.choice(["random", "value", "value", "page_header", "truncate", "cell"])
    if how == "cell":
        store.write_bytes(good)
        table, column = rng.choice([
            ("run_history", "started_at"), ("run_history", "models_executed"), ("run_history", "status"),
            ("run_history", "extra"), ("watermarks", "updated_at"), ("schedule_state", "cron_anchor"),
            ("schedule_state", "extra"), ("schedule_claims", "created_at"), ("schedule_claims", "logical_ts"),
            ("run_history", "finished_at"), ("run_history", "exit_code"),
        ])
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        conn = sqlite3.connect(store)
        try:
            conn.execute(
                f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE rowid IN "
                f"(SELECT rowid FROM {table} ORDER BY random() LIMIT 3)", (junk,),
            )
            conn.commit()
        finally:
            conn.close()
        return f"{table}.{column} set to {junk!r} in up to 3 rows"
    if how == "truncate":
        cut = rng.randrange(len(data))
        store.write_bytes(bytes(data[:cut]))
        return f"truncated to {cut} bytes"
    if how == "value":
        hits = [m.start() for m in _TEXT.finditer(bytes(good))]
        at = max(0, rng.choice(hits) - rng.randrange(0, 8))
    elif how == "page_header":
        at = rng.randrange(len(data) // 4096) * 4096 + rng.randrange(0, 100 if rng.random() < 0.3 else 12)
    else:
        at = rng.randrange(len(data) - 50)
    size = rng.choice([1, 4, 50])
    data[at : at + size] = bytes(rng.randrange(256) for _ in range(size))
    store.write_bytes(bytes(data))
    return f"{size} random bytes at offset {at} ({how})"


def _check(result: InProcess, codes: frozenset[int], store: Path, what: str) -> None:
    assert_no_traceback(result, what)
    assert result.returncode in codes, f"exit {result.returncode}: {what}\n{result.stderr[-1500:]}"
    stray = [line for line in result.stderr.splitlines() if line and not _LOG_LINE.match(line)]
    assert not stray, f"stderr lines that are not one-line messages {stray[:3]}: {what}"
    for line in result.error_lines:
        if f"{store} is damaged" in line:
            assert f"mv {store} {store}.corrupt" in line, f"{line}: {what}"
    if result.returncode == 1 and not result.error_lines:
        json.loads(result.stdout)  # a run whose models failed prints its document instead


def _damaged(result: InProcess, store: Path) -> bool:
    return any(f"state store at {store} is damaged" in line for line in result.error_lines)


@pytest.mark.slow
def test_a_corrupted_state_file_is_never_a_traceback(tmp_path: Path) -> None:
    config, store, good = _build(tmp_path)
    rng = random.Random(SEED)
    damaged_cases = 0
    replay: list[tuple[str, str, bytes]] = []
    for index in range(CASES):
        what = _corrupt(rng, store, good)
        label = f"ROCKY_FUZZ_SEED={SEED} case {index}: {what}"
        results: dict[str, InProcess] = {}
        commands = READERS + (WRITERS if index % 4 == 0 else [])
        corrupted = store.read_bytes() if store.exists() else b""
        for argv, codes in commands:
            result = rocky_in_process(["-c", str(config), *argv, "--output", "json"], deadline_seconds=60)
            _check(result, codes, store, f"{label}; rocky {' '.join(argv)}")
            results[" ".join(argv[:2])] = result
        found = [name for name in ("history", "state") if _damaged(results[name], store)]
        if found:
            damaged_cases += 1
            doctor = results["doctor --now"]
            assert doctor.returncode == 3, f"{label}: {found[0]} found damage, doctor did not"
            checks = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
            assert checks["state"] == "critical", f"{label}: {checks}"
            if len(replay) < 3:
                replay.append((label, found[0], corrupted))
    assert damaged_cases, "no corruption was ever detected: the generator is not damaging the store"

    # the same damage seen by real processes
    for label, command, corrupted in replay:
        for suffix in ("-wal", "-shm"):
            store.with_name(store.name + suffix).unlink(missing_ok=True)
        store.write_bytes(corrupted)
        real = run_rocky(["-c", str(config), command], cwd=tmp_path)
        assert real.returncode == 1, label
        [line] = [x for x in real.stderr.splitlines() if x.startswith("error:")]
        assert line.startswith(f"error: state store at {store} is damaged: ") and "mv " in line, label
