"""Two machines, one remote: what an overlap does under each concurrency_control (deployment contract,
"When two processes overlap"), with real ``rocky run`` processes on separate state directories.

Both runs download the same generation (a's pipeline_start hook holds it until b's run has started, so b
has downloaded too); b's pipeline_start hook then holds b until a's pipeline_complete, which fires after
a's upload: a uploads first and b second, ordered on events, never on time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.engine.state.remote.conftest import (
    WATERMARK_KEY,
    Machine,
    Remote,
    barrier_hook,
    snapshot_rows,
)

pytestmark = [pytest.mark.services, pytest.mark.slow]

# watermarks are stored and shown in UTC with a Z (the published wire format)
A_TS, B_TS = "2024-01-01T00:00:00Z", "2025-06-01T00:00:00Z"


def _errors_hook(m: Machine) -> str:
    """A pipeline_error hook appending its event context to the machine's ``errors.jsonl``."""
    log = m.root / "errors.jsonl"
    return f"\n[[hook.on_pipeline_error]]\ncommand = 'cat >> {log}; echo >> {log}'\n"


def _overlap(
    remote: Remote, machines: Callable[[str], Machine], tmp_path: Path, mode: str
) -> tuple[Machine, Machine, tuple[int, str, str], tuple[int, str, str]]:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    a, b = machines("a"), machines("b")
    state = remote.state_toml(concurrency_control=mode)
    a.write(state, barrier_hook(barrier, "a", "b", done="a-uploaded") + _errors_hook(a))
    b.write(state, barrier_hook(barrier, "b", "a-uploaded") + _errors_hook(b))
    a.seed(A_TS.replace("T", " ").removesuffix("Z"))
    b.seed(B_TS.replace("T", " ").removesuffix("Z"))
    pa, pb = a.popen("run", "-o", "json"), b.popen("run", "-o", "json")
    out_a, err_a = pa.communicate(timeout=120)
    out_b, err_b = pb.communicate(timeout=120)
    return a, b, (pa.returncode, out_a, err_a), (pb.returncode, out_b, err_b)


def _remote_watermark(remote: Remote, tmp_path: Path) -> str:
    data = remote.snapshot()
    assert data is not None
    rows = snapshot_rows(data, tmp_path, f"SELECT value FROM watermarks WHERE key = '{WATERMARK_KEY}'")
    return str(rows[0][0])


_RUN_RECORD = "run_id, started_at, finished_at, status"


def _remote_records(remote: Remote, tmp_path: Path) -> list[tuple[object, ...]]:
    data = remote.snapshot()
    assert data is not None
    query = f"SELECT {_RUN_RECORD} FROM run_history ORDER BY 1"
    return [tuple(r) for r in snapshot_rows(data, tmp_path, query)]


def _remote_runs(remote: Remote, tmp_path: Path) -> list[str]:
    return [str(r[0]) for r in _remote_records(remote, tmp_path)]


@pytest.mark.parametrize("backend", ["s3", "tiered"])
def test_cas_overlap_exactly_one_loses_loudly(
    backend: str, request: pytest.FixtureRequest, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    remote: Remote = request.getfixturevalue(f"{backend}_remote")
    a, b, (rc_a, out_a, err_a), (rc_b, out_b, err_b) = _overlap(remote, machines, tmp_path, "cas")

    assert rc_a == 0, err_a
    assert rc_b == 1, f"the second uploader must fail closed:\n{err_b}"
    logged = [json.loads(line) for line in err_b.splitlines() if line.startswith("{")]
    error = [e["message"] for e in logged if e["level"] == "error"]
    assert len(error) == 1
    # the loser tells one story (issue 13 item 12): its document, its pipeline_error hook and its local
    # run record all say Failure, exit 1, naming the race
    lost_doc = json.loads(out_b)
    assert lost_doc["status"] == "Failure"
    assert any("lost a state upload race" in e["error"] for e in lost_doc["errors"])
    assert b.local_rows("SELECT status, exit_code FROM run_history") == [("Failure", 1)]
    [fired] = [json.loads(line) for line in (b.root / "errors.jsonl").read_text().splitlines() if line]
    assert fired["event"] == "pipeline_error" and "lost a state upload race" in fired["error"]
    assert not (a.root / "errors.jsonl").exists()
    assert "lost a state upload race" in error[0]
    assert 'with concurrency_control = "cas" this run\'s state was not uploaded' in error[0]
    assert "the other run's state stands" in error[0]
    assert "keep one scheduler per project" in error[0]

    # The winner's state stands; the loser's watermark was refused, not silently overwritten or merged.
    winner_run = json.loads(out_a)["run_id"]
    assert a.watermark() == A_TS and b.watermark() == B_TS
    assert _remote_watermark(remote, tmp_path) == A_TS
    assert _remote_runs(remote, tmp_path) == [winner_run]

    # The loser's next run downloads the winner's state and continues from it. Run ids are unique per
    # store only (millisecond resolution), so two machines that start together may mint the same id:
    # the lost run is told apart by its whole record.
    lost = b.local_rows(f"SELECT {_RUN_RECORD} FROM run_history")[0]
    again = b.rocky("run", "-o", "json")
    assert again.returncode == 0, again.stderr
    assert _remote_watermark(remote, tmp_path) == B_TS
    rerun = json.loads(again.stdout)["run_id"]
    assert _remote_runs(remote, tmp_path) == sorted([winner_run, rerun])
    assert lost not in _remote_records(remote, tmp_path)
    local_runs = b.local_rows("SELECT run_id FROM run_history ORDER BY 1")
    assert local_runs == [(r,) for r in sorted([winner_run, rerun])]


def test_off_overlap_last_writer_wins_silently(
    s3_remote: Remote, machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    a, _, (rc_a, _, err_a), (rc_b, out_b, err_b) = _overlap(s3_remote, machines, tmp_path, "off")

    # As documented: both succeed, and the later upload replaces the earlier one whole.
    assert rc_a == 0, err_a
    assert rc_b == 0, err_b
    assert "race" not in err_a + err_b
    assert _remote_watermark(s3_remote, tmp_path) == B_TS
    assert _remote_runs(s3_remote, tmp_path) == [json.loads(out_b)["run_id"]]
    assert a.watermark() == A_TS  # a's watermark survives only on a's own volume


def test_valkey_cas_warns_once_and_falls_back(
    valkey_remote: Remote, machines: Callable[[str], Machine]
) -> None:
    m = machines("m")
    m.write(valkey_remote.state_toml(concurrency_control="cas"))
    m.seed("2024-01-01 00:00:00")
    first = m.rocky("run")
    assert first.returncode == 0, first.stderr
    warning = "is not available on the valkey backend"
    assert first.stderr.count(warning) == 1
    assert "this run uploads unconditionally and the last writer wins" in first.stderr
    assert valkey_remote.snapshot() is not None
    # The fallback is unconditional: someone else's upload in between does not fail the next run.
    valkey_remote.put_snapshot(valkey_remote.snapshot() or b"")
    second = m.rocky("run")
    assert second.returncode == 0, second.stderr
    assert second.stderr.count(warning) == 1


def test_local_cas_is_a_no_op(machines: Callable[[str], Machine]) -> None:
    m = machines("m")
    m.write('[state]\nbackend = "local"\nconcurrency_control = "cas"\n')
    m.seed("2024-01-01 00:00:00")
    result = m.rocky("run")
    assert result.returncode == 0, result.stderr
    assert "cas" not in result.stderr and "remote" not in result.stderr
    assert m.watermark() == A_TS


def test_idempotency_key_race_across_machines(
    s3_remote: Remote, machines: Callable[[str], Machine]
) -> None:
    a, b = machines("a"), machines("b")
    for m in (a, b):
        m.write(s3_remote.state_toml())
        m.seed("2024-01-01 00:00:00")
    procs = [m.popen("run", "--idempotency-key", "nightly-2024-01-01", "-o", "json") for m in (a, b)]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    statuses = sorted(d["status"] for d in docs)
    assert statuses.count("Success") == 1, statuses
    winner = next(d for d in docs if d["status"] == "Success")
    loser = next(d for d in docs if d["status"] != "Success")
    assert loser["status"] in ("SkippedInFlight", "SkippedIdempotent")
    assert loser["skipped_by_run_id"] == winner["run_id"]
