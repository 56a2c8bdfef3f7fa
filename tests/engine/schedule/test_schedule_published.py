"""``GET /api/v1/schedule`` validates against the published ``ScheduleStatusOutput`` (audit finding 7).

The project has a cron pipeline no tick has anchored, a stalled (overdue) cron one, a throttled freshness
one, an ``after`` one with a claim in flight, and one whose schedule cannot be resolved; the lock is wedged
(a fractional heartbeat age: the published type is a whole number). The document read over HTTP, and the
library's ``schedule_status``, must validate and say the right thing in every published field, while our
own names stay beside the published ones.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rocky_sdk.types_generated.schedule_status_schema import ScheduleStatusOutput

from rocky_engine.schedule.tick_lock import TickLock
from rocky_engine.schedule.view import schedule_status
from rocky_engine.state import StateStore
from rocky_engine.state._time import rfc3339
from rocky_engine.state.schedule_claims import ClaimRepo
from tests.engine.schedule.kit import Clock, SimChild, project_at, reconciler, transformation
from tests.engine.server.kit import GOOD_MODELS, InProcessServer

BODY = (
    transformation("never", 'cron = "0 * * * *"')
    + transformation("stalled", 'cron = "0 * * * *"\ncatchup = "skip"')
    + transformation("throttled", "freshness = true")
    + transformation("downstream", 'after = ["stalled"]')
    + transformation("broken", 'cron = "0 25 * * *"')
    + '\n[schedule]\ntimezone = "Europe/Lisbon"\n'
    + "\n[freshness]\nexpected_lag_seconds = 3600\n"
)


def _check(doc: dict[str, Any]) -> None:
    published = ScheduleStatusOutput.model_validate(doc)
    assert published.timezone == "Europe/Lisbon"
    assert published.counts.model_dump() == {
        "scheduled": 5, "enabled": 5, "config_errors": 1, "in_flight": 1, "overdue": 1, "throttled": 1,
    }
    by_name = {p.pipeline: p for p in published.pipelines}
    never, stalled = by_name["never"], by_name["stalled"]
    # never anchored: no projection yet, and it says why (not "never fires")
    assert never.awaiting_first_anchor is True and never.next_fire_at is None and never.catchup == "latest"
    assert stalled.awaiting_first_anchor is False and stalled.catchup == "skip"
    assert stalled.next_fire_at is not None and stalled.next_fire_at < published.now  # overdue
    throttled = by_name["throttled"]
    assert throttled.throttle is not None and throttled.throttle.kind.value == "failure_backoff"
    assert throttled.throttle.resume_at > published.now
    assert throttled.last_attempt_outcome == "failure" and throttled.last_attempt_at is not None
    # non-cron pipelines carry the catch-up policy too, and are not awaiting an anchor
    for name in ("throttled", "downstream"):
        assert by_name[name].catchup == "latest" and by_name[name].awaiting_first_anchor is False
    assert by_name["broken"].config_error and by_name["broken"].awaiting_first_anchor is True
    assert published.tick_lock.state.value == "wedged"
    assert published.tick_lock.heartbeat_age_seconds is not None
    assert 400 <= published.tick_lock.heartbeat_age_seconds < 1000
    # our names stay beside the published ones
    raw = {p["pipeline"]: p for p in doc["pipelines"]}
    assert raw["throttled"]["throttle"]["reason"] == raw["throttled"]["throttle"]["kind"] == "failure_backoff"
    assert raw["throttled"]["last_outcome"] == raw["throttled"]["last_attempt_outcome"] == "failure"
    assert [c["pipeline"] for c in doc["claims"]] == ["downstream"]


def test_the_schedule_document_validates_against_the_published_model(tmp_path: Path) -> None:
    project = project_at(tmp_path, BODY, GOOD_MODELS)
    real = datetime.now(UTC)
    old = Clock(real - timedelta(hours=3))
    reconciler(old, SimChild(old)).tick(project, pipeline="stalled")  # anchors; no tick since: overdue
    recent = Clock(real - timedelta(seconds=30))
    reconciler(recent, SimChild(recent, codes={"throttled": [1]})).tick(project, pipeline="throttled")
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(claim_key="downstream|after|x", pipeline="downstream", source="after",
                                logical_ts=None, submission_id="sub-1", now=real)
    lock = TickLock(project.dot_rocky, heartbeat_interval=3600)
    assert lock.acquire() == "acquired"
    try:
        stale = time.time() - 400.6
        os.utime(lock.heartbeat_path, (stale, stale))
        with InProcessServer(project.config.path) as srv, srv.client() as client:
            response = client.get("/api/v1/schedule")
        assert response.status_code == 200, response.text
        _check(response.json())
        now = datetime.now(UTC)
        with StateStore.open(project.state_path(), writer=False) as store:  # the library's view: no `now`
            _check({"now": rfc3339(now), **schedule_status(project, store, now).wire()})
    finally:
        lock.release()
