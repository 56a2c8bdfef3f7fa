"""The Markdown form of ``rocky brief``: fit to paste into Slack (or send by mail) as it is.

Slack renders neither tables nor ``#`` headings, so the digest uses what both Slack and Markdown show the
same way: ``*bold*`` section titles (italic in plain Markdown, still a title), ``-`` bullet lines and
inline ``code`` for names. Each section says when it has no data rather than disappearing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocky_engine.ops.md_text import STATUS_WORD, when

if TYPE_CHECKING:
    from rocky_engine.wire.brief import BriefResult


def render_brief_md(brief: BriefResult) -> str:
    since, generated = when(brief.since), when(brief.generated_at)
    lines = [f"*Rocky brief* · since {since} ({brief.window}) · generated {generated}"]
    lines += ["", *_runs(brief), "", *_drift(brief), "", *_freshness(brief), "", *_quality(brief), "",
              *_scheduler(brief.scheduler.wire())]
    return "\n".join(lines) + "\n"


def _age(seconds: int | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds}s"
    if seconds % 86400 == 0:
        return f"{seconds // 86400}d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _no_data(title: str, availability: str, reason: str | None, empty: str) -> list[str]:
    if availability == "unavailable":
        return [f"*{title}* — unavailable: {reason or 'the state store cannot be read'}"]
    return [f"*{title}* — {empty}"]


def _runs(brief: BriefResult) -> list[str]:
    s = brief.runs
    if s.availability != "available":
        return _no_data("Runs", s.availability, s.reason, "no runs in this window")
    head = f"*Runs* — {s.total} run(s): {s.succeeded} succeeded, {s.partial} partial, {s.failed} failed"
    lines = [head]
    for f in s.failures:
        word = STATUS_WORD.get(f.status, f.status.upper())
        what = f" — failed: {', '.join(f'`{m}`' for m in f.failed_models[:8])}" if f.failed_models else ""
        more = f" (+{len(f.failed_models) - 8} more)" if len(f.failed_models) > 8 else ""
        error = f"\n  > {f.error}" if f.error else ""
        at = when(f.started_at)
        lines.append(f"- {word} `{f.pipeline or '?'}` `{f.run_id}` at {at}{what}{more}{error}")
    if s.failed + s.partial > len(s.failures):
        lines.append(f"- … {s.failed + s.partial - len(s.failures)} more; see `rocky history`")
    return lines


def _drift(brief: BriefResult) -> list[str]:
    s = brief.drift
    if s.availability != "available":
        return _no_data("Drift", s.availability, s.reason, "no runs to report drift from")
    if s.tables_drifted == 0:
        return ["*Drift* — no schema drift"]
    lines = [f"*Drift* — {s.tables_drifted} table(s) drifted"]
    lines += [f"- `{e.table}`: {e.action} ({e.reason})" for e in s.events]
    return lines


def _freshness(brief: BriefResult) -> list[str]:
    s = brief.freshness
    if s.availability != "available":
        return _no_data("Freshness", s.availability, s.reason, "no successful run and no budget yet")
    with_budget = [p for p in s.pipelines if p.budget_seconds is not None]
    head = (f"*Freshness* — {s.stale} of {len(with_budget)} pipeline(s) with a budget stale" if with_budget
            else "*Freshness* — no freshness budgets configured")
    lines = [head]
    for p in s.pipelines:
        if p.last_success_at is None and p.budget_seconds is None:
            continue
        budget = f", budget {_age(p.budget_seconds)}" if p.budget_seconds is not None else ""
        flag = " — STALE" if p.stale else ""
        lines.append(f"- `{p.pipeline}` last success {_age(p.age_seconds)} ago{budget}{flag}"
                     if p.age_seconds is not None else f"- `{p.pipeline}` never succeeded{budget}{flag}")
    return lines


def _quality(brief: BriefResult) -> list[str]:
    s = brief.quality
    if s.availability != "available":
        return _no_data("Quality", s.availability, s.reason, "no checks ran in this window")
    head = f"*Quality* — {s.checks_run} check(s), {s.checks_failed} failed"
    if s.gate_failed_runs:
        head += f"; {s.gate_failed_runs} run(s) failed their check gate"
    lines = [head]
    for f in s.failures:
        severity = f" ({f.severity})" if f.severity else ""
        lines.append(f"- `{f.table}` {f.check}{severity} in `{f.run_id}`")
    return lines


def _scheduler(section: dict[str, Any]) -> list[str]:
    availability = section.get("availability", "no_data")
    if availability == "no_data" and section.get("scheduled_pipelines") == 0:
        return [f"*Scheduler* — {section.get('reason') or 'nothing is scheduled'}"]
    if availability != "available":
        return _no_data("Scheduler", str(availability), section.get("reason"), "no data")
    lines = ["*Scheduler*"]
    shown = {"availability"}
    paused = section.get("paused") or []
    if paused:
        names = [f"`{p.get('pipeline')}`" if isinstance(p, dict) else f"`{p}`" for p in paused]
        lines.append(f"- paused: {', '.join(names)}")
    streaks = section.get("consecutive_failures") or []
    if isinstance(streaks, list) and streaks:
        parts = [f"`{s.get('pipeline')}` {s.get('consecutive_failures')} in a row" for s in streaks
                 if isinstance(s, dict)]
        lines.append(f"- failing: {', '.join(parts)}")
    if "last_evaluated_at" in section:
        lines.append(f"- last tick: {when(str(section['last_evaluated_at']))}")
    if "incident_count" in section:
        count = section["incident_count"]
        kept = section.get("incidents_kept")
        tail = f" ({kept} kept)" if kept is not None else ""
        newest = section.get("newest_incident")
        newest_text = f"; newest: `{newest}`" if newest else ""
        lines.append(f"- incidents in this window: {count}{tail}{newest_text}")
    shown |= {"paused", "holds", "consecutive_failures", "last_evaluated_at", "incident_count",
              "incidents_kept", "newest_incident"}
    for key, value in section.items():
        if key in shown or value in (None, [], {}):
            continue
        lines.append(f"- {key.replace('_', ' ')}: {_plain(value)}")
    if len(lines) == 1:
        lines[0] += " — no holds, no failure streaks"
    return lines


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value[:10])
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in list(value.items())[:10])
    return f"`{value}`" if isinstance(value, str) else str(value)
