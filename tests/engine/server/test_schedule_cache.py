"""The schedule document's pipelines are rendered once and reused while nothing they show changed
(``server/schedule_cache.py``; the bench regression of issue 12), and the reused text is byte for byte the
document the server wrote before the cache: the stored rows, the time (a throttle lapsing), the files a
freshness budget reads, rocky.toml and the secrets each make it render again."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rocky_engine.output import redacted_document_text
from rocky_engine.project import Project
from rocky_engine.redact import Redactor, known, set_known
from rocky_engine.schedule.plan import build_plan
from rocky_engine.schedule.view import schedule_status
from rocky_engine.server.context import ServerContext, build_context
from rocky_engine.server.schedule_cache import PipelinesCache
from rocky_engine.server.schedule_view import schedule_document_text
from rocky_engine.server.settings import ServerSettings
from rocky_engine.state import StateStore
from rocky_engine.state.schedule import ScheduleRepo
from rocky_engine.state.schedule_claims import ClaimRepo
from rocky_engine.wire.schedule import ScheduleDocument, ServerScheduler
from tests.engine.schedule.kit import T0, Clock, SimChild, project_at, reconciler, transformation
from tests.engine.server.kit import GOOD_MODELS, InProcessServer

SCHEDULED = (
    transformation("hourly", 'cron = "0 * * * *"')
    + transformation("after_hourly", 'after = ["hourly"]')
    + transformation("fresh", "freshness = true")
    + transformation("broken", 'cron = "0 * * * *"\ntimezone = "Mars/Olympus_Mons"')
    + transformation("failing", "freshness = true")
    + "\n[freshness]\nexpected_lag_seconds = 3600\n"
)
_NOW = re.compile(r'"now": "[^"]*"')


@pytest.fixture
def secrets() -> Iterator[None]:
    """Whatever a test installs as the process's secrets is undone afterwards."""
    before = known()
    yield
    set_known(before)


def _ticked(root: Path, at: datetime) -> Project:
    """SCHEDULED, ticked at ``at``: ``failing`` failed (a failure backoff), a webhook claim in flight,
    ``hourly`` paused."""
    project = project_at(root, SCHEDULED, GOOD_MODELS)
    clock = Clock(at)
    reconciler(clock, SimChild(clock, codes={"failing": [1]})).tick(project)
    with StateStore.open(project.state_path()) as store:
        ClaimRepo(store).submit(claim_key="webhook|abc", pipeline="hourly", source="webhook",
                                logical_ts=T0, submission_id="sub-abc", now=T0)
        ScheduleRepo(store).set_paused("hourly", True, at)
    return project


def _context(project: Project) -> ServerContext:
    return build_context(ServerSettings(config_path=project.config.path), project)


def _uncached(ctx: ServerContext) -> str:
    """The document as the server wrote it before the cache: every entry built and encoded per read."""
    project, plan = ctx.projects.plan()
    now = datetime.now(UTC)
    with ctx.read_store() as store:
        status = schedule_status(project, store, now, plan)
    return redacted_document_text(ScheduleDocument(
        now="x", timezone=status.timezone, tick_lock=status.tick_lock, counts=status.counts,
        pipelines=status.pipelines, claims=status.claims,
        config_error=ctx.projects.config_error or status.config_error,
        scheduler=ServerScheduler(resident=ctx.settings.scheduler),
    ))


def _same_document(cached: str, reference: str) -> None:
    assert _NOW.sub('"now": "x"', cached) == _NOW.sub('"now": "x"', reference)


@pytest.mark.parametrize("secret", [None, "Mars/Olympus_Mons", "pipelines"])
def test_the_kept_text_is_the_document_written_entry_by_entry(
    tmp_path: Path, secrets: None, secret: str | None
) -> None:
    # a secret in an entry (the zone in broken's config_error) is redacted in the kept text; one that
    # matches the array's own key makes the route write the whole document the ordinary way
    project = _ticked(tmp_path, datetime.now(UTC) - timedelta(seconds=30))
    if secret is not None:
        set_known(Redactor({"SECRET_NAME": secret}))
    ctx = _context(project)
    first = schedule_document_text(ctx)
    again = schedule_document_text(ctx)
    reference = _uncached(ctx)
    _same_document(first, reference)
    _same_document(again, reference)
    assert '"throttle": {\n        "reason": "failure_backoff"' in first
    assert '"claim_key": "webhook|abc"' in first and '"paused": true' in first
    if secret == "Mars/Olympus_Mons":
        assert "${SECRET_NAME}" in first and secret not in first
    assert ctx.schedule_cache.renders == 1


def test_a_repeated_read_decodes_and_resolves_nothing_again(tmp_path: Path) -> None:
    ctx = _context(_ticked(tmp_path, datetime.now(UTC) - timedelta(seconds=30)))
    for _ in range(3):
        schedule_document_text(ctx)
    cache = ctx.schedule_cache
    assert cache.renders == 1
    # three schedules resolved once for the plan, and the two freshness ones (their budget reads the
    # model files) on every read
    assert cache.resolutions == 3 + 2 * 3


def test_a_write_to_the_store_shows_at_the_next_read(tmp_path: Path) -> None:
    project = _ticked(tmp_path, datetime.now(UTC) - timedelta(seconds=30))
    ctx = _context(project)
    assert '"pipeline": "after_hourly",\n      "enabled": true,\n      "paused": false' in (
        schedule_document_text(ctx))
    with StateStore.open(project.state_path()) as store:
        ScheduleRepo(store).set_paused("after_hourly", True, datetime.now(UTC))
    text = schedule_document_text(ctx)
    assert '"pipeline": "after_hourly",\n      "enabled": true,\n      "paused": true' in text
    assert ctx.schedule_cache.renders == 2
    _same_document(text, _uncached(ctx))


def test_a_throttle_lapses_at_its_resume_instant_and_returns_if_the_clock_does(tmp_path: Path) -> None:
    project = _ticked(tmp_path, T0)
    ctx = _context(project)
    project, plan = ctx.projects.plan()
    cache = PipelinesCache()

    def throttle_of_failing(now: datetime) -> str | None:
        with ctx.read_store() as store:
            entries = cache.pipelines(project, plan, store, now).entries
        [failing] = [e for e in entries if e.pipeline == "failing"]
        return failing.throttle.resume_at if failing.throttle else None

    resume = throttle_of_failing(T0 + timedelta(minutes=1))
    assert resume is not None
    resume_at = datetime.fromisoformat(resume)
    assert throttle_of_failing(resume_at - timedelta(milliseconds=1)) == resume
    assert cache.renders == 1
    assert throttle_of_failing(resume_at) is None
    assert throttle_of_failing(resume_at + timedelta(hours=5)) is None
    assert cache.renders == 2
    assert throttle_of_failing(T0 + timedelta(minutes=2)) == resume  # a clock set back
    assert cache.renders == 3


def test_a_freshness_budget_set_in_a_model_sidecar_shows_without_a_rocky_toml_change(tmp_path: Path) -> None:
    project = project_at(tmp_path, transformation("fresh", "freshness = true"), GOOD_MODELS)
    ctx = _context(project)
    assert '"config_error": "freshness = true but no budget' in schedule_document_text(ctx)
    (tmp_path / "models" / "good.toml").write_text("freshness = { max_lag_seconds = 600 }\n")
    text = schedule_document_text(ctx)
    assert '"config_error":' not in text
    assert ctx.schedule_cache.renders == 2


def test_an_edited_rocky_toml_shows_at_the_next_read(tmp_path: Path) -> None:
    project = project_at(tmp_path, SCHEDULED, GOOD_MODELS)
    ctx = _context(project)
    assert '"pipeline": "nightly"' not in schedule_document_text(ctx)
    with project.config.path.open("a", encoding="utf-8") as f:
        f.write(transformation("nightly", 'cron = "0 2 * * *"'))
    text = schedule_document_text(ctx)
    assert '"pipeline": "nightly"' in text
    assert ctx.schedule_cache.renders == 2
    _same_document(text, _uncached(ctx))


def test_the_route_serves_the_kept_rendering(tmp_path: Path) -> None:
    project = _ticked(tmp_path, datetime.now(UTC) - timedelta(seconds=30))
    with InProcessServer(project.config.path) as srv, srv.client() as c:
        bodies = [c.get("/api/v1/schedule") for _ in range(3)]
        renders = srv.ctx.schedule_cache.renders
    assert [r.status_code for r in bodies] == [200, 200, 200]
    assert bodies[0].headers["content-type"] == "application/json"
    assert renders == 1
    _same_document(bodies[2].text, bodies[0].text)
    assert {p["pipeline"] for p in bodies[2].json()["pipelines"]} == {
        "after_hourly", "broken", "failing", "fresh", "hourly",
    }


def test_a_secret_learnt_after_the_rendering_is_redacted_at_the_next_read(
    tmp_path: Path, secrets: None
) -> None:
    ctx = _context(project_at(tmp_path, SCHEDULED, GOOD_MODELS))
    assert "Mars/Olympus_Mons" in schedule_document_text(ctx)
    set_known(Redactor({"ZONE": "Mars/Olympus_Mons"}))
    text = schedule_document_text(ctx)
    assert "Mars/Olympus_Mons" not in text and "${ZONE}" in text


def test_a_rendering_is_never_served_for_another_plan(tmp_path: Path) -> None:
    # both loaded first, so the process's secrets (replaced by every load) are the same for both reads
    first = project_at(tmp_path / "a", SCHEDULED, GOOD_MODELS)
    nightly = transformation("nightly", 'cron = "0 2 * * *"')
    second = project_at(tmp_path / "b", SCHEDULED + nightly, GOOD_MODELS)
    cache = PipelinesCache()
    with StateStore.open(first.state_path(), writer=False) as store:
        names = [
            [e.pipeline for e in cache.pipelines(p, build_plan(p.config), store, T0).entries]
            for p in (first, second)
        ]
    assert "nightly" not in names[0] and "nightly" in names[1]
    assert cache.renders == 2
