"""Demand evaluation: cron first sight, catch-up, DST in two zones, after, freshness; the backoff ladder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rocky_engine.schedule.backoff import active_backoff, failure_delay
from rocky_engine.schedule.demand import (
    CATCHUP_GRACE,
    MISSED_CAP,
    evaluate_after,
    evaluate_cron,
    evaluate_freshness,
    next_occurrence,
    occurrences_between,
    shortest_interval,
    to_instant,
    zone,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# ---------------------------------------------------------------------- cron basics


def test_first_sight_anchors_at_now_and_does_not_fire() -> None:
    ev = evaluate_cron("0 3 * * *", "UTC", "latest", None, utc(2026, 5, 2, 3, 30))
    assert ev.reason == "not_due" and ev.first_sight
    assert ev.new_anchor == utc(2026, 5, 2, 3, 30)
    assert ev.next_fire_at == utc(2026, 5, 3, 3, 0)


def test_after_first_sight_the_next_occurrence_fires_once() -> None:
    anchor = utc(2026, 5, 2, 3, 30)
    assert evaluate_cron("0 3 * * *", "UTC", "latest", anchor, utc(2026, 5, 3, 2, 59)).reason == "not_due"
    ev = evaluate_cron("0 3 * * *", "UTC", "latest", anchor, utc(2026, 5, 3, 3, 0, 20))
    assert (ev.reason, ev.logical_ts, ev.missed) == ("due", utc(2026, 5, 3, 3, 0), 0)
    assert ev.new_anchor == utc(2026, 5, 3, 3, 0) and ev.next_fire_at == utc(2026, 5, 4, 3, 0)
    # The anchor moved to the occurrence: the same occurrence is not due again.
    again = evaluate_cron("0 3 * * *", "UTC", "latest", ev.new_anchor, utc(2026, 5, 3, 3, 5))
    assert again.reason == "not_due"


def test_stored_projection_answers_without_croniter() -> None:
    ev = evaluate_cron(
        "this is not cron", "UTC", "latest", utc(2026, 5, 2), utc(2026, 5, 2, 1), next_fire_at=utc(2026, 5, 3)
    )
    assert ev.reason == "not_due" and ev.next_fire_at is None


def test_catchup_latest_fires_the_newest_missed_occurrence_once() -> None:
    anchor = utc(2026, 5, 1, 3, 0)
    now = utc(2026, 5, 4, 9, 0)  # down for three days
    ev = evaluate_cron("0 3 * * *", "UTC", "latest", anchor, now)
    assert (ev.reason, ev.logical_ts, ev.missed) == ("due", utc(2026, 5, 4, 3, 0), 2)


def test_catchup_skip_moves_the_anchor_and_fires_nothing_after_an_outage() -> None:
    anchor = utc(2026, 5, 1, 3, 0)
    now = utc(2026, 5, 4, 9, 0)
    ev = evaluate_cron("0 3 * * *", "UTC", "skip", anchor, now)
    assert (ev.reason, ev.logical_ts, ev.missed) == ("catchup_skipped", utc(2026, 5, 4, 3, 0), 3)
    assert ev.new_anchor == utc(2026, 5, 4, 3, 0) and ev.next_fire_at == utc(2026, 5, 5, 3, 0)


def test_catchup_skip_still_fires_an_occurrence_seen_on_time() -> None:
    anchor = utc(2026, 5, 1, 3, 0)
    on_time = utc(2026, 5, 2, 3, 0) + CATCHUP_GRACE
    assert evaluate_cron("0 3 * * *", "UTC", "skip", anchor, on_time).reason == "due"
    late = on_time + timedelta(seconds=1)
    assert evaluate_cron("0 3 * * *", "UTC", "skip", anchor, late).reason == "catchup_skipped"


def test_missed_count_is_capped_for_a_very_long_outage() -> None:
    occ = occurrences_between("* * * * *", "UTC", utc(2026, 1, 1), utc(2026, 3, 1))
    assert occ.capped and occ.count == MISSED_CAP
    assert occ.newest == utc(2026, 3, 1)


def test_shortest_interval() -> None:
    assert shortest_interval("*/5 * * * *") == timedelta(minutes=5)
    assert shortest_interval("0 3 * * 1-5") == timedelta(days=1)


# ---------------------------------------------------------------------- DST


def fires(expr: str, tz: str, start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Simulate a reconciler ticking every ``step`` from ``start`` to ``end``: the instants that fired."""
    anchor: datetime | None = None
    projection: datetime | None = None
    fired: list[datetime] = []
    now = start
    while now <= end:
        ev = evaluate_cron(expr, tz, "latest", anchor, now, next_fire_at=projection)
        if ev.first_sight or ev.reason == "due":
            anchor, projection = ev.new_anchor, ev.next_fire_at
        if ev.reason == "due":
            assert ev.logical_ts is not None
            fired.append(ev.logical_ts)
        now += step
    return fired


def local(instants: list[datetime], tz: str) -> list[str]:
    return [i.astimezone(zone(tz)).strftime("%m-%d %H:%M %Z") for i in instants]


MINUTE = timedelta(minutes=1)


def test_lisbon_spring_forward_fires_the_skipped_hour_once() -> None:
    # 2026-03-29 01:00 WET -> 02:00 WEST: local 01:00-01:59 does not exist.
    fired = fires("30 1 * * *", "Europe/Lisbon", utc(2026, 3, 28, 0), utc(2026, 3, 30, 3), MINUTE)
    assert local(fired, "Europe/Lisbon") == ["03-28 01:30 WET", "03-29 02:00 WEST", "03-30 01:30 WEST"]
    assert fired[1] == utc(2026, 3, 29, 1, 0)  # the transition instant


def test_lisbon_fall_back_fires_the_repeated_hour_once() -> None:
    # 2026-10-25 02:00 WEST -> 01:00 WET: local 01:00-01:59 happens twice.
    fired = fires("30 1 * * *", "Europe/Lisbon", utc(2026, 10, 24, 0), utc(2026, 10, 26, 3), MINUTE)
    assert local(fired, "Europe/Lisbon") == ["10-24 01:30 WEST", "10-25 01:30 WEST", "10-26 01:30 WET"]


def test_new_york_spring_forward_fires_the_skipped_slot_once() -> None:
    # 2026-03-08 02:00 EST -> 03:00 EDT.
    fired = fires("30 2 * * *", "America/New_York", utc(2026, 3, 7, 12), utc(2026, 3, 9, 12), MINUTE)
    assert local(fired, "America/New_York") == ["03-08 03:00 EDT", "03-09 02:30 EDT"]
    every15 = fires(
        "*/15 * * * *", "America/New_York", utc(2026, 3, 8, 6, 40), utc(2026, 3, 8, 7, 20), MINUTE
    )
    # 01:45 EST, then the gap 02:00-02:45 collapses onto 03:00 EDT together with 03:00 itself, then 03:15.
    assert local(every15, "America/New_York") == ["03-08 01:45 EST", "03-08 03:00 EDT", "03-08 03:15 EDT"]


def test_new_york_fall_back_fires_the_repeated_hour_once() -> None:
    # 2026-11-01 02:00 EDT -> 01:00 EST.
    fired = fires("30 1 * * *", "America/New_York", utc(2026, 10, 31, 0), utc(2026, 11, 2, 12), MINUTE)
    assert local(fired, "America/New_York") == ["10-31 01:30 EDT", "11-01 01:30 EDT", "11-02 01:30 EST"]
    hourly = fires("0 * * * *", "America/New_York", utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 7, 30), MINUTE)
    # 01:00 fires once (first pass); the second pass of the hour fires nothing; 02:00 EST follows.
    assert local(hourly, "America/New_York") == ["11-01 01:00 EDT", "11-01 02:00 EST"]


def test_to_instant_maps_gaps_to_the_transition_and_folds_to_the_first_pass() -> None:
    ny = zone("America/New_York")
    assert to_instant(datetime(2026, 3, 8, 2, 30), ny) == utc(2026, 3, 8, 7, 0)
    assert to_instant(datetime(2026, 11, 1, 1, 30), ny) == utc(2026, 11, 1, 5, 30)
    assert next_occurrence("30 1 * * *", "America/New_York", utc(2026, 11, 1, 5, 30)) == utc(
        2026, 11, 2, 6, 30
    )


# ---------------------------------------------------------------------- after and freshness


def test_after_waits_for_every_upstream_to_succeed_after_own_last_success_started() -> None:
    own = utc(2026, 5, 2, 3, 0)
    assert not evaluate_after(own, {"a": utc(2026, 5, 2, 3, 5), "b": utc(2026, 5, 2, 2, 0)}).due
    assert evaluate_after(own, {"a": utc(2026, 5, 2, 3, 5), "b": None}).waiting_on == ("b",)
    ev = evaluate_after(own, {"a": utc(2026, 5, 2, 3, 5), "b": utc(2026, 5, 2, 3, 7)})
    assert ev.due and ev.logical_ts == utc(2026, 5, 2, 3, 7)
    assert not evaluate_after(own, {"a": own}).due  # finished exactly when we started: not after


def test_after_with_no_own_success_is_due_once_upstreams_succeeded() -> None:
    assert evaluate_after(None, {"a": utc(2026, 5, 1)}).due
    assert not evaluate_after(None, {"a": None}).due


def test_freshness_with_and_without_history() -> None:
    now = utc(2026, 5, 2, 12)
    assert evaluate_freshness(None, 3600, now).due  # never succeeded reads as exceeded
    assert not evaluate_freshness(now - timedelta(seconds=3600), 3600, now).due
    late = evaluate_freshness(now - timedelta(seconds=3601), 3600, now)
    assert late.due and late.lag_seconds == 3601


# ---------------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("failures", "minutes"),
    [(1, 5), (2, 10), (3, 20), (4, 40), (5, 80), (6, 160), (7, 320), (8, 360), (30, 360), (10_000, 360)],
)
def test_failure_backoff_ladder(failures: int, minutes: int) -> None:
    assert failure_delay(failures) == timedelta(minutes=minutes)


def test_active_backoff_for_failure_and_partial() -> None:
    t = utc(2026, 5, 2, 3)
    b = active_backoff("failure", 3, t, t + timedelta(minutes=19))
    assert b is not None and b.reason == "failure_backoff" and b.resume_at == t + timedelta(minutes=20)
    assert active_backoff("failure", 3, t, t + timedelta(minutes=20)) is None
    p = active_backoff("partial", 7, t, t + timedelta(minutes=59))
    assert p is not None and p.reason == "partial_backoff" and p.resume_at == t + timedelta(minutes=60)
    assert active_backoff("partial", 7, t, t + timedelta(minutes=60)) is None
    assert active_backoff("success", 0, t, t) is None
    assert active_backoff(None, 0, None, t) is None
