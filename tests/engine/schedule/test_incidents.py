"""Incident bundles: the document, atomic write, newest 50, symlinked directory refused."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from rocky_engine.schedule.incidents import (
    IncidentBundle,
    IncidentDirRefused,
    incident_file_name,
    list_incidents,
    pointers_for,
    write_incident,
)
from tests.engine.schedule.kit import T0


def bundle(n: int = 0, **changes: object) -> IncidentBundle:
    base: dict[str, object] = {
        "recorded_at": T0 + timedelta(minutes=n),
        "pipeline": "orders",
        "source": "cron",
        "outcome": "failure",
        "logical_ts": T0,
        "submission_id": f"{n:08x}" + "ab" * 12,
        "exit_code": 1,
        "attempts": 2,
        "consecutive_failures": 3,
        "pointers": pointers_for(
            config_path=Path("/srv/a/rocky.toml"), submission_id="s1", since=T0, resident=False
        ),
    }
    base.update(changes)
    return IncidentBundle(**base)  # type: ignore[arg-type]


def test_bundle_document_and_name(tmp_path: Path) -> None:
    path = write_incident(tmp_path / "incidents", bundle(exit_code=None))
    assert path.name == "20260502T030000Z-orders-00000000.json"
    doc = json.loads(path.read_text())
    assert doc == {
        "incident_version": 1,
        "recorded_at": "2026-05-02T03:00:00.000Z",
        "pipeline": "orders",
        "source": "cron",
        "outcome": "failure",
        "logical_ts": "2026-05-02T03:00:00.000Z",
        "submission_id": "00000000" + "ab" * 12,
        "exit_code": None,
        "attempts": 2,
        "consecutive_failures": 3,
        "pointers": [
            {
                "kind": "history",
                "command": "rocky -c /srv/a/rocky.toml history --since 2026-05-02",
                "match": "submission_id=s1",
            }
        ],
    }
    assert [p.name for p in (tmp_path / "incidents").iterdir()] == [path.name]  # no temp file left


def test_resident_pointers_name_the_http_endpoints() -> None:
    pointers = [p.wire() for p in pointers_for(
        config_path=Path("r.toml"), submission_id="s9", since=T0, resident=True, run_id="run-1"
    )]
    assert {"kind": "job", "url": "/api/v1/jobs/s9"} in pointers
    assert {"kind": "schedule", "url": "/api/v1/schedule"} in pointers
    assert {"kind": "run", "run_id": "run-1"} in pointers


def test_keeps_newest_50_and_deletes_only_its_own_files(tmp_path: Path) -> None:
    directory = tmp_path / "incidents"
    directory.mkdir()
    (directory / "notes.txt").write_text("mine")
    (directory / "20200101T000000Z-handmade.json").write_text("{}")  # not a name the writer produces
    for n in range(55):
        write_incident(directory, bundle(n))
    kept = list_incidents(directory)
    assert len(kept) == 50
    assert kept[0].name == incident_file_name(T0 + timedelta(minutes=54), "orders", f"{54:08x}")
    assert kept[-1].name == incident_file_name(T0 + timedelta(minutes=5), "orders", f"{5:08x}")
    assert (directory / "notes.txt").exists() and (directory / "20200101T000000Z-handmade.json").exists()


def test_symlinked_incidents_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    link = tmp_path / "incidents"
    link.symlink_to(real)
    with pytest.raises(IncidentDirRefused, match="refusing to write incident bundles through the symlink"):
        write_incident(link, bundle())
    assert list(real.iterdir()) == []
    with pytest.raises(IncidentDirRefused):
        list_incidents(link)


def test_pipeline_names_are_sanitised_in_file_names() -> None:
    assert incident_file_name(T0, "a/../b", "XYZ") == "20260502T030000Z-a____b-00000000.json"
    assert list_incidents(Path("/nonexistent/incidents")) == []
