"""A signal while a table's ``before_materialize`` hook runs: that table is not copied after the signal,
the document, exit code and run record say it was not run, and ``--resume-latest`` copies exactly it."""

from __future__ import annotations

import json
import signal

import pytest

from tests.engine.replication.conftest import ReplicationProject
from tests.engine.run.parking_kit import parking_hook, signal_when_parked


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_during_a_tables_hook_leaves_it_for_the_resume(
    rp: ReplicationProject, sig: signal.Signals
) -> None:
    for name in ("t0", "t1", "t2"):
        rp.source_table("src__a", name, rows=5)
    hook, ready = parking_hook(rp.root, "before_materialize", "wh.stg__a.t1")
    rp.configure(sections=f"[pipeline.raw.execution]\nconcurrency = 1\n{hook}")
    proc = rp.popen("run", "--output", "json")
    stdout, stderr = signal_when_parked(proc, ready, sig, "t1")
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert (doc["status"], doc["interrupted"], doc["tables_copied"], doc["tables_failed"]) == (
        "PartialFailure", True, 1, 0)
    assert [(e["asset_key"][-1], e["error"]) for e in doc["errors"]] == [
        ("t1", "not run: the run was interrupted"), ("t2", "not run: the run was interrupted")
    ]
    assert rp.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 't1' "
                    "AND table_schema = 'stg__a'") == [(0,)]  # nothing of t1 after the signal
    with rp.store() as store:
        record = store.runs.get(doc["run_id"])
    assert record is not None and (record.status, record.exit_code) == ("PartialFailure", 130)
    assert [(m.model_name, m.status) for m in record.models_executed] == [
        ("wh.stg__a.t0", "success"), ("wh.stg__a.t1", "interrupted"), ("wh.stg__a.t2", "interrupted")
    ]
    ready.unlink()
    rp.configure(sections="[pipeline.raw.execution]\nconcurrency = 1\n")
    resumed = rp.run(resume_latest=True)
    assert (resumed.status, resumed.resumed_from, resumed.tables_skipped) == ("Success", doc["run_id"], 1)
    assert sorted(m.asset_key[-1] for m in resumed.materializations) == ["t1", "t2"]
    for name in ("t0", "t1", "t2"):  # each row exactly once
        assert rp.query(f"SELECT count(*), count(DISTINCT id) FROM stg__a.{name}") == [(5, 5)]
