"""The schedule plan: every scheduled pipeline resolved from rocky.toml, in ``after`` order.

Per pipeline: its cron and effective time zone, ``after`` upstreams, freshness, catch-up, retry, timeout,
enabled, and a ``config_error`` when the schedule cannot be resolved (a scheduled load pipeline, an unknown
time zone, an ``after`` naming a load or unknown pipeline, a bad cron). A pipeline with a config error
never fires (fail closed); the tick reports it. An ``after`` cycle is a project-level error (ConfigError).

Cron syntax can be left to the reconciler (``check_crons=False``), which checks an expression only when it
first anchors it, so a quiet tick does not import croniter at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError, RockyError
from rocky_engine.graph import find_cycles, topological_order

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig
    from rocky_engine.project import Project


@dataclass(frozen=True)
class PipelinePlan:
    """One pipeline as the reconciler sees it."""

    name: str
    pipeline_type: str
    scheduled: bool
    cron: str | None = None
    timezone: str = "UTC"
    after: tuple[str, ...] = ()
    freshness: bool = False
    catchup: str = "latest"
    retry_max: int = 0
    timeout_minutes: int = 0
    enabled: bool = True
    config_error: str | None = None

    @property
    def declared_sources(self) -> list[str]:
        """Declared demand sources in priority order (cron > after > freshness)."""
        sources = []
        if self.cron:
            sources.append("cron")
        if self.after:
            sources.append("after")
        if self.freshness:
            sources.append("freshness")
        return sources

    @property
    def runnable(self) -> bool:
        """Can ``rocky run --pipeline`` run it at all (load pipelines have no run record)."""
        return self.pipeline_type != "load"


@dataclass
class SchedulePlan:
    """Pipelines in topological order of ``after`` (alphabetical tie-break)."""

    pipelines: dict[str, PipelinePlan] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @property
    def scheduled(self) -> list[PipelinePlan]:
        return [self.pipelines[n] for n in self.order if self.pipelines[n].scheduled]


def build_plan(config: RockyConfig, *, check_crons: bool = True) -> SchedulePlan:
    """Resolve every pipeline's schedule.

    Args:
        config: the loaded project config.
        check_crons: check cron syntax here (imports croniter). The reconciler passes False and checks an
            expression only when it anchors it for the first time (an anchored expression was valid).

    Raises:
        ConfigError: ``after`` references form a cycle.
    """
    from rocky_engine.config.schedule_syntax import cron_problem, timezone_problem

    plan = SchedulePlan()
    zone_problems: dict[str, str | None] = {}
    for name, p in config.pipelines.items():
        sched = p.schedule
        if sched is None:
            plan.pipelines[name] = PipelinePlan(name=name, pipeline_type=p.type, scheduled=False)
            continue
        tz = sched.timezone or config.schedule.timezone
        error: str | None = None
        if p.type == "load":
            error = f"load pipeline '{name}' cannot be scheduled; run `rocky load` from a timer instead"
        if error is None and sched.cron is not None:
            if tz not in zone_problems:
                zone_problems[tz] = timezone_problem(tz)
            error = zone_problems[tz]
            if error is None and check_crons:
                error = cron_problem(sched.cron)
        for upstream in sched.after if error is None else ():
            target = config.pipelines.get(upstream)
            if target is None:
                error = f"after names '{upstream}', which is not a pipeline"
            elif target.type == "load":
                error = f"after names load pipeline '{upstream}', which records no run to wait for"
            if error:
                break
        if error is None and not (sched.cron or sched.after or sched.freshness):
            error = "the schedule declares no demand: set cron, after or freshness"
        plan.pipelines[name] = PipelinePlan(
            name=name,
            pipeline_type=p.type,
            scheduled=True,
            cron=sched.cron,
            timezone=tz,
            after=tuple(sched.after),
            freshness=sched.freshness,
            catchup=sched.catchup,
            retry_max=sched.retry.max,
            timeout_minutes=sched.timeout_minutes,
            enabled=sched.enabled,
            config_error=error,
        )
    graph = {n: [u for u in pp.after if u in plan.pipelines] for n, pp in plan.pipelines.items()}
    cycles = find_cycles(graph)
    if cycles:
        raise ConfigError(
            f"schedule after cycle detected involving: {cycles[0]}; none of them could ever become due",
            file=config.path,
            key=f"pipeline.{cycles[0][0]}.schedule.after",
            hint="remove one of those after entries (rocky validate lists every cycle)",
        )
    plan.order = topological_order(graph)
    return plan


def freshness_budget(project: Project, plan: PipelinePlan) -> int | None:
    """Seconds a freshness schedule tolerates: the smallest model ``max_lag_seconds`` of a transformation
    pipeline, else ``[freshness] expected_lag_seconds``; None when neither is set.

    Raises:
        RockyError: the pipeline's models cannot be loaded.
    """
    if budget_reads_models(plan):
        models = project.load_models(plan.name)
        lags = [m.max_lag_seconds for m in models.models.values() if m.max_lag_seconds is not None]
        if lags:
            return min(lags)
    return project.config.freshness.expected_lag_seconds


def budget_reads_models(plan: PipelinePlan) -> bool:
    """Does :func:`freshness_budget` read the pipeline's model files (so that its answer, unlike the rest
    of the plan, can change while rocky.toml does not)."""
    return plan.pipeline_type == "transformation"


def resolution_reads_files(pp: PipelinePlan) -> bool:
    """Can :func:`resolve_schedule` of ``pp`` answer differently for the same plan (it reads the model
    files for a freshness budget)? When False its answer holds for as long as the plan does."""
    return pp.config_error is None and pp.freshness and budget_reads_models(pp)


@dataclass(frozen=True)
class Resolution:
    """Whether a schedule can fire at all: its ``config_error``, else the freshness budget it runs on."""

    config_error: str | None
    freshness_budget: int | None = None


def resolve_schedule(
    pp: PipelinePlan, budget: Callable[[PipelinePlan], int | None], *, check_cron: bool
) -> Resolution:
    """Every reason ``pp``'s schedule cannot be resolved, the one rule behind ``rocky tick``'s
    ``config_error`` skips and ``GET /api/v1/schedule``'s ``config_error``: the plan's own error, a cron
    expression that does not parse (``check_cron``: when the plan did not check it), and a
    ``freshness = true`` with no budget or with models that do not load.

    Args:
        budget: the freshness budget of a pipeline (``freshness_budget`` bound to the project; the tick
            caches it per tick).
    """
    if pp.config_error is not None:
        return Resolution(pp.config_error)
    if check_cron and pp.cron:
        from rocky_engine.config.schedule_syntax import cron_problem

        problem = cron_problem(pp.cron)
        if problem is not None:
            return Resolution(problem)
    if not pp.freshness:
        return Resolution(None)
    try:
        seconds = budget(pp)
    except RockyError as exc:
        return Resolution(f"freshness budget unavailable: {exc}")
    if seconds is None:
        return Resolution(
            "freshness = true but no budget: set freshness.max_lag_seconds on a model or "
            "[freshness] expected_lag_seconds"
        )
    return Resolution(None, seconds)


def restrict(plan: SchedulePlan, names: Iterable[str]) -> list[str]:
    """``plan.order`` filtered to ``names`` (keeps the topological order)."""
    wanted = set(names)
    return [n for n in plan.order if n in wanted]
