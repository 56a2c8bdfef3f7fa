"""The redactor itself, and the surfaces that store text for later: a server job's result and error in the
state file, and an incident bundle on disk, written while the process knows a multi-line secret."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rocky_engine import redact
from rocky_engine.redact import Redactor
from rocky_engine.schedule.incidents import IncidentBundle, write_incident
from rocky_engine.state.jobs import JobRepo, JobRow
from rocky_engine.state.store import StateStore
from rocky_engine.wire.incident import IncidentPointer
from tests.engine.redact.scan import PEM, leaks

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


@pytest.fixture
def knows_pem() -> Iterator[None]:
    before = redact.known()
    redact.set_known(Redactor({"PEM_KEY": PEM}))
    try:
        yield
    finally:
        redact.set_known(before)


def test_the_redactor_replaces_a_multi_line_secret_whole_line_by_line_and_json_escaped() -> None:
    r = Redactor({"PEM_KEY": PEM, "SHORT": "abc", "TOKEN": "tok_123456789"})
    [first, second] = PEM.splitlines()[1:3]
    assert r(f"key: {PEM}") == "key: ${PEM_KEY}"
    assert r(f"one line: {second}!") == "one line: ${PEM_KEY}!"
    assert r(f"path /x/{first}.parquet") == "path /x/${PEM_KEY}.parquet"
    assert r('{"k": "' + PEM.replace("\n", "\\n") + '"}') == '{"k": "${PEM_KEY}"}'
    assert r("abc tok_123456789") == "abc ${TOKEN}"  # under 8 bytes: not replaced (a documented gap)
    assert r.deep({"e": [f"x {first}"], f"{second}": 1}) == {"e": ["x ${PEM_KEY}"], "${PEM_KEY}": 1}


def test_job_rows_and_incident_bundles_are_stored_redacted(tmp_path: Path, knows_pem: None) -> None:
    line = PEM.splitlines()[2]
    with StateStore.open(tmp_path / "state.db", writer=True) as store:
        JobRepo(store).upsert(JobRow(
            job_id="j1", kind="run", state="failed", submitted_at=NOW, pipeline="models",
            request={"pipeline": "models"}, result={"error": f"cannot read {PEM}", "files": [line]},
            error=f"the run failed: {line}",
        ))
        row = JobRepo(store).get("j1")
    assert row is not None and row.error == "the run failed: ${PEM_KEY}"
    path = write_incident(tmp_path / "incidents", IncidentBundle(
        recorded_at=NOW, pipeline="models", source="cron", outcome="failure", logical_ts=None,
        submission_id="s1", exit_code=1, attempts=1, consecutive_failures=1,
        pointers=[IncidentPointer(kind="history", command="rocky history", match=f"error {line}")],
    ))
    assert "${PEM_KEY}" in path.read_text()
    assert leaks(PEM, files=(tmp_path,)) == []
