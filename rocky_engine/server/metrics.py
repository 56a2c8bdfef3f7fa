"""``GET /metrics``: the server's counters and the scheduler's stored state in the Prometheus text format.

Counters live in this process (ticks, tick duration, demands fired and skipped, runs by outcome, webhook
answers by status); gauges are read from disk at scrape time (failure streaks, spool depth and oldest
demand, jobs by state, the tick lock), so a restarted server reports the truth at once. The text format
(version 0.0.4) is small enough to write directly; no client library registry is involved.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocky_engine.schedule.tick_output import TickOutput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: tick duration histogram buckets (seconds); a tick that runs a child lasts as long as the child
TICK_BUCKETS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600)

Labels = tuple[tuple[str, str], ...]


@dataclass
class ScrapeFacts:
    """What a scrape reads from disk; a fact that could not be read is None (the series is omitted)."""

    consecutive_failures: dict[str, int] | None = None
    spool_depth: int | None = None
    spool_oldest_age_seconds: float | None = None
    spool_readable: bool = True
    jobs_by_state: dict[str, int] | None = None
    tick_lock_state: str | None = None
    draining: bool = False
    scheduler_enabled: bool = False
    last_tick_age_seconds: float | None = None
    config_error: bool = False


class Metrics:
    """Thread-safe in-process counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ticks: Counter[Labels] = Counter()
        self.tick_buckets: list[int] = [0] * len(TICK_BUCKETS)
        self.tick_sum = 0.0
        self.tick_count = 0
        self.fired: Counter[Labels] = Counter()
        self.skipped: Counter[Labels] = Counter()
        self.runs: Counter[Labels] = Counter()
        self.webhooks: Counter[Labels] = Counter()
        self.refusals: Counter[Labels] = Counter()

    # ------------------------------------------------------------------ recording

    def tick(self, result: str, duration_seconds: float | None = None) -> None:
        """Count one tick attempt (``completed``, ``tick_in_progress``, ``state_busy`` ...)."""
        with self._lock:
            self.ticks[(("result", result),)] += 1
            if duration_seconds is not None:
                self.tick_sum += duration_seconds
                self.tick_count += 1
                for i, bound in enumerate(TICK_BUCKETS):
                    if duration_seconds <= bound:
                        self.tick_buckets[i] += 1

    def observe_tick(self, out: TickOutput, duration_seconds: float) -> str:
        """Record a finished tick's document; returns the tick result label it was counted under."""
        if out.tick_in_progress:
            result = "tick_in_progress"
        elif any(s.reason == "state_busy" and s.pipeline is None for s in out.skipped):
            result = "state_busy"
        elif out.errors:
            result = "error"
        elif out.interrupted:
            result = "interrupted"
        else:
            result = "completed"
        self.tick(result, duration_seconds)
        with self._lock:
            for e in out.executed:
                self.fired[(("pipeline", e.pipeline), ("source", e.source))] += 1
                self.runs[(("trigger", "webhook" if e.source == "webhook" else "schedule"),
                           ("outcome", e.outcome))] += 1
            for s in out.skipped:
                if s.pipeline is not None:
                    self.skipped[(("reason", s.reason),)] += 1
        return result

    def job_finished(self, outcome: str) -> None:
        """An API job ended (``success`` | ``partial`` | ``failure``)."""
        with self._lock:
            self.runs[(("trigger", "api"), ("outcome", outcome))] += 1

    def webhook(self, status: int) -> None:
        with self._lock:
            self.webhooks[(("status", str(status)),)] += 1

    def refused(self, reason: str) -> None:
        """A request refused before any route ran (``host_not_allowed``, ``header_too_large`` ...)."""
        with self._lock:
            self.refusals[(("reason", reason),)] += 1

    # ------------------------------------------------------------------ rendering

    def render(self, facts: ScrapeFacts) -> str:
        out = _Writer()
        with self._lock:
            out.family("rocky_scheduler_ticks_total", "counter",
                       "Resident scheduler tick attempts by result.", self.ticks.items())
            out.histogram("rocky_scheduler_tick_duration_seconds",
                          "Duration of ticks that ran (children included).",
                          self.tick_buckets, self.tick_sum, self.tick_count)
            out.family("rocky_scheduler_demands_fired_total", "counter",
                       "Demands the scheduler launched, by pipeline and source.", self.fired.items())
            out.family("rocky_scheduler_demands_skipped_total", "counter",
                       "Demands the scheduler skipped, by reason.", self.skipped.items())
            out.family("rocky_runs_total", "counter",
                       "Runs the server launched, by trigger and outcome.", self.runs.items())
            out.family("rocky_webhook_requests_total", "counter",
                       "Webhook ingress answers by HTTP status (202 accepted or duplicate).",
                       self.webhooks.items())
            out.family("rocky_http_refused_total", "counter",
                       "Requests refused before any route ran (Host, Origin, size, time and connection "
                       "limits), by reason.", self.refusals.items())
        if facts.consecutive_failures is not None:
            out.family("rocky_scheduler_consecutive_failures", "gauge",
                       "Consecutive failed or partial scheduled runs per pipeline.",
                       [((("pipeline", p),), n) for p, n in sorted(facts.consecutive_failures.items())])
        if facts.spool_depth is not None:
            out.family("rocky_webhook_spool_depth", "gauge",
                       "Accepted webhook demands no tick has consumed yet.", [((), facts.spool_depth)])
            out.family("rocky_webhook_spool_oldest_age_seconds", "gauge",
                       "Age of the oldest queued webhook demand (0 when the spool is empty).",
                       [((), facts.spool_oldest_age_seconds or 0.0)])
        out.family("rocky_webhook_spool_readable", "gauge",
                   "1 when the spool can be read; 0 means queued demands cannot be seen (page).",
                   [((), int(facts.spool_readable))])
        if facts.jobs_by_state is not None:
            out.family("rocky_jobs", "gauge", "Jobs recorded in the state store, by state.",
                       [((("state", s),), n) for s, n in sorted(facts.jobs_by_state.items())])
        if facts.tick_lock_state is not None:
            out.family("rocky_scheduler_tick_lock", "gauge",
                       "The tick lock state (1 for the current one): free | held | wedged | never.",
                       [((("state", s),), int(s == facts.tick_lock_state))
                        for s in ("free", "held", "wedged", "never")])
        if facts.last_tick_age_seconds is not None:
            out.family("rocky_scheduler_last_tick_age_seconds", "gauge",
                       "Seconds since this server's scheduler last finished a tick attempt.",
                       [((), facts.last_tick_age_seconds)])
        out.family("rocky_scheduler_enabled", "gauge", "1 when the server runs the resident scheduler.",
                   [((), int(facts.scheduler_enabled))])
        out.family("rocky_config_error", "gauge", "1 when rocky.toml failed to load at the last read.",
                   [((), int(facts.config_error))])
        out.family("rocky_server_draining", "gauge", "1 while the server drains for shutdown.",
                   [((), int(facts.draining))])
        return out.text()


class _Writer:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(
        self, name: str, kind: str, help_text: str, samples: Iterable[tuple[Labels, float]]
    ) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in sorted(samples):
            self._lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def histogram(self, name: str, help_text: str, buckets: list[int], total: float, count: int) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} histogram")
        for bound, n in zip(TICK_BUCKETS, buckets, strict=True):
            self._lines.append(f'{name}_bucket{{le="{_number(bound)}"}} {n}')
        self._lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
        self._lines.append(f"{name}_sum {_number(total)}")
        self._lines.append(f"{name}_count {count}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels | Mapping[str, str]) -> str:
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer():
        return str(int(value))
    return repr(round(value, 6))
