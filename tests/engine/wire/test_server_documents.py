"""Every JSON route of a real ``rocky serve --scheduler`` answers a document that validates strictly against
its wire model: health, jobs (202, one, list), runs, schedule, spool, the webhook's answer, errors (401, 404,
409 with the running job), and the summary ``rocky serve`` prints when it stops."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rocky_engine.wire.history import HistoryResult
from rocky_engine.wire.jobs import JobAccepted, JobDocument, JobList
from rocky_engine.wire.run import RunResult
from rocky_engine.wire.schedule import ScheduleDocument
from rocky_engine.wire.server import DemandAnswer, ErrorBody, HealthDocument, ServeResult
from rocky_engine.wire.spool import SpoolResult
from tests.engine.server.kit import (
    GOOD_MODELS,
    SECRET,
    ServeProcess,
    sign,
    transformation,
    wait_for,
    wait_job,
    write_project,
)
from tests.engine.wire.strict import assert_strict

pytestmark = pytest.mark.slow

TOKEN = "t0ken-for-the-wire-tests"
# The first API job waits in its pipeline_start hook until the test creates ``go`` (after it has seen
# ``started``), so a second job meets the running one deterministically.
HOLD = """
[[hook.on_pipeline_start]]
command = "touch started; while [ ! -e go ]; do sleep 0.05; done"
timeout_ms = 120000
"""


@dataclass
class Served:
    server: ServeProcess
    root: Path
    docs: dict[str, tuple[int, Any]]


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    body = transformation("orders", 'cron = "0 3 * * *"') + transformation("other") + HOLD
    write_project(root, body, GOOD_MODELS)
    server = ServeProcess(root, "--scheduler", "--poll-interval-seconds", "3600", "--token", TOKEN,
                          env={"ROCKY_WEBHOOK_SECRET": SECRET}).start()
    docs: dict[str, tuple[int, Any]] = {}

    def keep(name: str, r: httpx.Response) -> Any:
        docs[name] = (r.status_code, r.json())
        return r.json()

    try:
        with server.client(headers=_auth()) as c:
            keep("health", c.get("/api/v1/health"))
            wait_for(lambda: c.get("/api/v1/schedule").json()["scheduler"].get("last_tick"), 60,
                     what="the first tick")
            payload = b'{"reason": "upstream landed"}'
            keep("webhook accepted", c.post("/api/v1/hooks/trigger/other", content=payload,
                                            headers={**sign(payload), "X-Rocky-Delivery": "evt-9"}))
            keep("webhook duplicate", c.post("/api/v1/hooks/trigger/other", content=payload,
                                             headers={**sign(payload), "X-Rocky-Delivery": "evt-9"}))
            keep("spool", c.get("/api/v1/schedule/spool"))
            first = keep("job accepted", c.post("/api/v1/jobs/run", json={"pipeline": "orders"}))["job_id"]
            wait_for(lambda: (root / "started").exists(), 60, what="the first job's hook")
            keep("job refused", c.post("/api/v1/jobs/run", json={"pipeline": "orders"}))
            keep("job running", c.get(f"/api/v1/jobs/{first}"))
            (root / "go").touch()
            wait_job(c, first, timeout=120)
            keep("job finished", c.get(f"/api/v1/jobs/{first}"))
            keep("jobs", c.get("/api/v1/jobs"))
            keep("runs", c.get("/api/v1/runs"))
            keep("schedule", c.get("/api/v1/schedule"))
            keep("job not found", c.get("/api/v1/jobs/no-such-job"))
            keep("bad request", c.post("/api/v1/jobs/run", content=b"[1]"))
            keep("no route", c.get("/api/v1/nowhere"))
        with httpx.Client(base_url=server.url, timeout=30) as anonymous:
            keep("unauthorized", anonymous.get("/api/v1/runs"))
        server.signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0, server.log()[-3000:]
        docs["serve"] = (0, server.output())
        yield Served(server, root, docs)
    finally:
        server.kill()


ROUTES: list[tuple[str, type[Any], int]] = [
    ("health", HealthDocument, 200),
    ("webhook accepted", DemandAnswer, 202),
    ("webhook duplicate", DemandAnswer, 202),
    ("spool", SpoolResult, 200),
    ("job accepted", JobAccepted, 202),
    ("job refused", ErrorBody, 409),
    ("job running", JobDocument, 200),
    ("job finished", JobDocument, 200),
    ("jobs", JobList, 200),
    ("runs", HistoryResult, 200),
    ("schedule", ScheduleDocument, 200),
    ("job not found", ErrorBody, 404),
    ("bad request", ErrorBody, 400),
    ("no route", ErrorBody, 404),
    ("unauthorized", ErrorBody, 401),
    ("serve", ServeResult, 0),
]


@pytest.mark.parametrize(("name", "model", "status"), ROUTES, ids=[r[0] for r in ROUTES])
def test_route_document_validates_strictly(served: Served, name: str, model: type[Any], status: int) -> None:
    code, doc = served.docs[name]
    assert code == status, doc
    assert_strict(doc, model)


def test_the_documents_say_what_happened(served: Served) -> None:
    docs = {name: doc for name, (_, doc) in served.docs.items()}
    assert docs["webhook accepted"]["demand"] == "accepted"
    assert docs["webhook duplicate"] == {"demand": "duplicate"}
    assert [d["delivery_id"] for d in docs["spool"]["demands"]] == ["evt-9"]
    assert docs["job refused"]["code"] == "mutation_in_progress"
    assert docs["job refused"]["job_id"] == docs["job accepted"]["job_id"]
    assert docs["job running"]["state"] == "running" and docs["job running"]["result"] is None
    finished = JobDocument.model_validate(docs["job finished"])
    assert finished.state == "succeeded" and finished.result is not None
    assert finished.result.outcome == "success" and finished.result.status == "Success"
    # the child's own document travels inside the job's result, and it is a run document too
    assert finished.result.output is not None
    assert_strict(finished.result.output, RunResult)
    assert [j["job_id"] for j in docs["jobs"]["jobs"]] == [docs["job accepted"]["job_id"]]
    assert [r["pipeline"] for r in docs["runs"]["runs"]] == ["orders"]
    schedule = ScheduleDocument.model_validate(docs["schedule"])
    assert [p.pipeline for p in schedule.pipelines] == ["orders"] and schedule.scheduler.last_tick is not None
    assert docs["serve"]["scheduler"] is True


def test_the_job_output_file_is_a_run_document(served: Served) -> None:
    """``.rocky/jobs/<id>.out`` is read back into the job and then removed: nothing is left behind."""
    assert list((served.root / ".rocky" / "jobs").glob("*.out")) == []
    stored = json.loads(json.dumps(served.docs["job finished"][1]["result"]["output"]))
    assert stored["command"] == "run"
