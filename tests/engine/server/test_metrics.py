"""``/metrics``: the Prometheus text format, and the families alerting relies on."""

from __future__ import annotations

import re
from pathlib import Path

from rocky_engine.schedule.tick_output import TickOutput
from rocky_engine.server.metrics import Metrics, ScrapeFacts
from rocky_engine.wire.tick import Executed, Skipped
from tests.engine.server.kit import SECRET, InProcessServer, sign, simple_project

_LABELS = r'(\{([a-z_]+="([^"\\]|\\.)*",?)+\})?'
_SAMPLE = re.compile(rf"^[a-z_]+{_LABELS} (-?[0-9.e+-]+|\+Inf|NaN)$")


def _check_format(text: str) -> dict[str, str]:
    """Every line is a HELP, a TYPE or a sample; returns the TYPE of each family."""
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        assert _SAMPLE.match(line), line
    return types


def test_observe_tick_counts_fired_skipped_and_outcomes() -> None:
    m = Metrics()
    out = TickOutput(dry_run=False, now="2026-05-02T04:00:00.000Z")
    out.executed = [
        Executed(pipeline="a", source="cron", logical_ts=None, submission_id="1", exit_code=0,
                 outcome="success", attempts=1),
        Executed(pipeline="b", source="webhook", logical_ts=None, submission_id="2", exit_code=1,
                 outcome="failure", attempts=1),
    ]
    out.skipped = [Skipped(pipeline="c", source="after", reason="failure_backoff")]
    assert m.observe_tick(out, 0.2) == "completed"
    busy = TickOutput(dry_run=False, now="x",
                      skipped=[Skipped(reason="state_busy")])
    assert m.observe_tick(busy, 0.01) == "state_busy"
    in_progress = TickOutput(dry_run=False, now="x", tick_in_progress=True)
    assert m.observe_tick(in_progress, 0.0) == "tick_in_progress"
    m.webhook(202)
    m.webhook(429)
    m.job_finished("partial")
    text = m.render(ScrapeFacts(consecutive_failures={"a": 0, 'we"ird\\name': 3}, spool_depth=2,
                                spool_oldest_age_seconds=12.5, jobs_by_state={"running": 1, "failed": 2},
                                tick_lock_state="held", scheduler_enabled=True, last_tick_age_seconds=1.25))
    types = _check_format(text)
    assert types["rocky_scheduler_ticks_total"] == "counter"
    assert types["rocky_scheduler_tick_duration_seconds"] == "histogram"
    assert types["rocky_scheduler_consecutive_failures"] == "gauge"
    for line in [
        'rocky_scheduler_ticks_total{result="completed"} 1',
        'rocky_scheduler_ticks_total{result="state_busy"} 1',
        'rocky_scheduler_ticks_total{result="tick_in_progress"} 1',
        "rocky_scheduler_tick_duration_seconds_count 3",
        'rocky_scheduler_tick_duration_seconds_bucket{le="0.01"} 2',
        'rocky_scheduler_tick_duration_seconds_bucket{le="+Inf"} 3',
        'rocky_scheduler_demands_fired_total{pipeline="a",source="cron"} 1',
        'rocky_scheduler_demands_fired_total{pipeline="b",source="webhook"} 1',
        'rocky_scheduler_demands_skipped_total{reason="failure_backoff"} 1',
        'rocky_runs_total{trigger="schedule",outcome="success"} 1',
        'rocky_runs_total{trigger="webhook",outcome="failure"} 1',
        'rocky_runs_total{trigger="api",outcome="partial"} 1',
        'rocky_webhook_requests_total{status="429"} 1',
        'rocky_scheduler_consecutive_failures{pipeline="we\\"ird\\\\name"} 3',
        "rocky_webhook_spool_depth 2",
        "rocky_webhook_spool_oldest_age_seconds 12.5",
        'rocky_jobs{state="failed"} 2',
        'rocky_scheduler_tick_lock{state="held"} 1',
        'rocky_scheduler_tick_lock{state="free"} 0',
        "rocky_scheduler_last_tick_age_seconds 1.25",
        "rocky_scheduler_enabled 1",
        "rocky_server_draining 0",
    ]:
        assert line in text.splitlines(), line


def test_metrics_endpoint_counts_webhook_answers(tmp_path: Path) -> None:
    config = simple_project(tmp_path)
    with InProcessServer(config, scheduler=True, webhook_secrets=(SECRET,), poll_interval_seconds=3600,
                         token="t") as srv, srv.client() as c:
        srv.first_tick()
        c.post("/api/v1/hooks/trigger/orders", content=b"1", headers=sign(b"1"))
        c.post("/api/v1/hooks/trigger/orders", content=b"1", headers=sign(b"1"))
        c.post("/api/v1/hooks/trigger/orders", content=b"2")
        r = c.get("/metrics", headers={"Authorization": "Bearer t"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    _check_format(r.text)
    assert 'rocky_webhook_requests_total{status="202"} 2' in r.text
    assert 'rocky_webhook_requests_total{status="401"} 1' in r.text
    assert "rocky_webhook_spool_depth 1" in r.text
    assert 'rocky_scheduler_ticks_total{result="completed"} 1' in r.text
    assert 'rocky_scheduler_tick_lock{state="free"} 1' in r.text
