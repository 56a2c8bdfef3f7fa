"""Cross-reference checks behind ``rocky validate``: what loading alone cannot see.

Loading (``load_config``) proves each table is well-formed; this module checks that the tables agree with
each other and with the machine (cron expressions, time zones, model files). Every finding is a
:class:`ValidationMessage` with a stable code, so scripts can match on codes rather than on wording.

====  ========  ==============================================================================
Code  Severity  Meaning
====  ========  ==============================================================================
V001  error     rocky.toml cannot be loaded (missing file, bad TOML, unset ${VAR}, bad key)
V002  error     a pipeline or connector names an adapter that is not defined
V003  error     a transformation pipeline's models directory does not exist
V004  error     the model DAG has a dependency cycle
V005  error     a model depends on a model that does not exist
V006  error     a schedule ``cron`` is not a valid 5-field cron expression
V007  error     a timezone (``[schedule]`` or a pipeline schedule) is not a known IANA zone
V008  error     a schedule ``after`` names a pipeline that does not exist
V009  error     a load pipeline is scheduled, or a schedule ``after`` names a load pipeline
V010  error     schedule ``after`` references form a cycle
V011  error     ``depends_on`` names a pipeline that does not exist
V012  warning   a loading warning: an unknown key in a lenient table (``[adapter.*]``, ``[pipeline.*]``,
                its ``[source]`` / ``[target]``, hooks, ``[freshness]``) is ignored, an unknown ``on_*``
                hook event is skipped, an unknown top-level table is ignored
V013  error     model files cannot be loaded (bad sidecar, unreadable file, ...)
V014  error     an adapter of the wrong kind for its role (e.g. a Fivetran adapter as a warehouse)
V015  error     pipeline ``depends_on`` references form a cycle
V016  warning   ``freshness = true`` on a schedule with no budget (``[freshness] expected_lag_seconds``, or
                for a transformation pipeline a model ``freshness.max_lag_seconds``)
V017  error     a replication template placeholder is not a ``schema_pattern`` component
V018  error     ``[state]`` cannot work as written (``gcs``, a remote backend without its location)
V019  error     a connector manifest file does not exist
V020  warning   the project defines no pipelines and no connectors
====  ========  ==============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from rocky_engine.config.adapters import WAREHOUSE_TYPES
from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import (
    LoadPipeline,
    PipelineConfig,
    QualityPipeline,
    ReplicationPipeline,
    SnapshotPipeline,
    TransformationPipeline,
)

# re-exported: callers and tests import these from here
from rocky_engine.config.schedule_syntax import cron_problem as cron_problem
from rocky_engine.config.schedule_syntax import timezone_problem as timezone_problem
from rocky_engine.graph import find_cycles
from rocky_engine.output import Result, md_table
from rocky_engine.wire.validate import (
    AdapterSummary,
    ModelsSummary,
    PipelineSummary,
    ValidateResult,
    ValidationMessage,
)

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _error(code: str, message: str, field: str | None = None) -> ValidationMessage:
    return ValidationMessage(severity="error", code=code, message=message, field=field)


def _warning(code: str, message: str, field: str | None = None) -> ValidationMessage:
    return ValidationMessage(severity="warning", code=code, message=message, field=field)


def validate_config(cfg: RockyConfig) -> list[ValidationMessage]:
    """Every cross-reference problem of a loaded config (model files are checked by validate_models)."""
    messages = [_warning("V012", warning, _warning_field(warning)) for warning in cfg.warnings]
    if not cfg.pipelines and not cfg.connectors:
        messages.append(
            _warning("V020", "no pipelines or connectors are defined; add a [pipeline.<name>] table")
        )
    messages.extend(_adapter_references(cfg))
    messages.extend(_depends_on(cfg))
    messages.extend(_schedules(cfg))
    messages.extend(_templates(cfg))
    messages.extend(_state(cfg))
    messages.extend(_connectors(cfg))
    return messages


# The table may end in an array index (``[hook.on_x[0]]``), so match up to the last ']' before a space.
_WARNING_KEY = re.compile(r"'([^']+)' in \[(\S+)\]")


def _warning_field(warning: str) -> str | None:
    """The key a loading warning is about (``unknown hook event 'on_x' in [hook]`` -> ``hook.on_x``)."""
    match = _WARNING_KEY.search(warning)
    return f"{match.group(2)}.{match.group(1)}" if match else None


# --- adapters -------------------------------------------------------------------------------------------


def _adapter_roles(cfg: RockyConfig) -> Iterator[tuple[str, str, str]]:
    """(field, adapter name, role) for every adapter reference; role is "warehouse" or "discovery"."""
    for name, p in cfg.pipelines.items():
        base = f"pipeline.{name}"
        if isinstance(p, ReplicationPipeline):
            yield f"{base}.source.adapter", p.source.adapter, "warehouse"
            if p.source.discovery is not None:
                yield f"{base}.source.discovery.adapter", p.source.discovery.adapter, "discovery"
            yield f"{base}.target.adapter", p.target.adapter, "warehouse"
        elif isinstance(p, SnapshotPipeline):
            yield f"{base}.source.adapter", p.source.adapter, "warehouse"
            yield f"{base}.target.adapter", p.target.adapter, "warehouse"
        elif isinstance(p, TransformationPipeline | QualityPipeline | LoadPipeline):
            yield f"{base}.target.adapter", p.target.adapter, "warehouse"
    for name, c in cfg.connectors.items():
        yield f"connector.{name}.target.adapter", c.target.adapter, "warehouse"


def _adapter_references(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    defined = ", ".join(sorted(cfg.adapters)) or "(none defined)"
    for field, ref, role in _adapter_roles(cfg):
        adapter = cfg.adapters.get(ref)
        if adapter is None:
            yield _error(
                "V002",
                f"{field} names adapter '{ref}', which is not defined; defined adapters: {defined}. "
                f"Add an [adapter.{ref}] table or use a defined name",
                field,
            )
        elif role == "warehouse" and adapter.type not in WAREHOUSE_TYPES:
            yield _error(
                "V014",
                f"{field} names adapter '{ref}' of type '{adapter.type}', which only discovers sources; "
                "use a duckdb or postgres adapter here",
                field,
            )


# --- pipeline graph -------------------------------------------------------------------------------------


def _depends_on(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    graph: dict[str, list[str]] = {}
    for name, p in cfg.pipelines.items():
        graph[name] = []
        for dep in p.depends_on:
            if dep in cfg.pipelines:
                graph[name].append(dep)
            else:
                yield _error(
                    "V011",
                    f"pipeline '{name}' depends_on '{dep}', which is not a pipeline; "
                    f"pipelines: {', '.join(sorted(cfg.pipelines))}",
                    f"pipeline.{name}.depends_on",
                )
    for members in find_cycles(graph):
        yield _error(
            "V015",
            f"depends_on cycle detected involving: {members}; remove one of those depends_on entries",
            f"pipeline.{members[0]}.depends_on",
        )


# --- schedules ------------------------------------------------------------------------------------------


def _schedules(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    problem = timezone_problem(cfg.schedule.timezone)
    if problem:
        yield _error("V007", f"[schedule] {problem}", "schedule.timezone")
    after_graph: dict[str, list[str]] = {}
    for name, p in cfg.pipelines.items():
        sched = p.schedule
        if sched is None:
            continue
        base = f"pipeline.{name}.schedule"
        if isinstance(p, LoadPipeline):
            yield _error(
                "V009",
                f"load pipeline '{name}' cannot be scheduled: a load re-ingests every file on each run "
                "and records no run the scheduler can observe; "
                f"remove [{base}] and run `rocky load` from a timer",
                base,
            )
            continue
        if sched.cron is not None:
            problem = cron_problem(sched.cron)
            if problem:
                yield _error("V006", f"pipeline '{name}': {problem}", f"{base}.cron")
        if sched.timezone is not None:
            problem = timezone_problem(sched.timezone)
            if problem:
                yield _error("V007", f"pipeline '{name}': {problem}", f"{base}.timezone")
        after_graph[name] = []
        for upstream in sched.after:
            target = cfg.pipelines.get(upstream)
            if target is None:
                yield _error(
                    "V008",
                    f"pipeline '{name}' schedule after names '{upstream}', which is not a pipeline; "
                    f"pipelines: {', '.join(sorted(cfg.pipelines))}",
                    f"{base}.after",
                )
            elif isinstance(target, LoadPipeline):
                yield _error(
                    "V009",
                    f"pipeline '{name}' schedule after names load pipeline '{upstream}'; load pipelines "
                    "record no run the scheduler can observe, so this would never fire",
                    f"{base}.after",
                )
            else:
                after_graph[name].append(upstream)
        if (
            sched.freshness
            and cfg.freshness.expected_lag_seconds is None
            and not isinstance(p, TransformationPipeline)
        ):
            yield _warning(
                "V016",
                f"pipeline '{name}' has freshness = true but no budget; set [freshness] expected_lag_seconds",
                f"{base}.freshness",
            )
    for members in find_cycles(after_graph):
        yield _error(
            "V010",
            f"schedule after cycle detected involving: {members}; none of them could ever become due. "
            "Remove one of those after entries",
            f"pipeline.{members[0]}.schedule.after",
        )


# --- replication templates, state, connectors -----------------------------------------------------------


def _templates(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    for name, p in cfg.pipelines.items():
        if not isinstance(p, ReplicationPipeline):
            continue
        components = p.source.schema_pattern.components
        for i, component in enumerate(components):
            if component.endswith("...") and i != len(components) - 1:
                yield _error(
                    "V017",
                    f"pipeline '{name}': only the last schema_pattern component can be variadic "
                    f"('{component}' is not last)",
                    f"pipeline.{name}.source.schema_pattern.components",
                )
        names = [c.removesuffix("...") for c in components]
        for key in ("catalog_template", "schema_template"):
            template: str = getattr(p.target, key)
            for placeholder in _PLACEHOLDER.findall(template):
                if placeholder not in names:
                    yield _error(
                        "V017",
                        f"pipeline '{name}': target.{key} uses {{{placeholder}}}, which is not a source "
                        f"schema_pattern component; components: {', '.join(names) or '(none)'}",
                        f"pipeline.{name}.target.{key}",
                    )


def _state(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    state = cfg.state
    if state.backend == "gcs":
        yield _error(
            "V018",
            "state backend 'gcs' is not supported yet; use local, s3, valkey or tiered",
            "state.backend",
        )
    if state.backend in ("s3", "tiered") and not state.s3_bucket:
        yield _error("V018", f"state backend '{state.backend}' needs s3_bucket", "state.s3_bucket")
    if state.backend in ("valkey", "tiered") and not state.valkey_url:
        yield _error("V018", f"state backend '{state.backend}' needs valkey_url", "state.valkey_url")


def _connectors(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    for name, c in cfg.connectors.items():
        manifest = c.manifest_path(cfg.root)
        if not manifest.is_file():
            yield _error(
                "V019",
                f"connector '{name}' manifest {manifest} does not exist; fix the path (relative to "
                "rocky.toml's directory) or add the connector.toml",
                f"connector.{name}.manifest",
            )


# --- models ---------------------------------------------------------------------------------------------


def validate_models(
    cfg: RockyConfig, env: Mapping[str, str] | None = None
) -> tuple[list[ValidationMessage], int]:
    """Load the models of every transformation pipeline; returns the findings and the model count."""
    from rocky_engine.errors import CircularDependencyError, RockyError, UnknownDependencyError
    from rocky_engine.models import load_models, models_base_dir

    messages: list[ValidationMessage] = []
    names: set[str] = set()
    #: models glob -> the smallest model max_lag_seconds (None: no model sets one); absent: not loadable
    lags: dict[str, int | None] = {}
    seen: set[str] = set()
    for name, p in cfg.pipelines.items():
        if not isinstance(p, TransformationPipeline) or p.models in seen:
            continue
        seen.add(p.models)
        field = f"pipeline.{name}.models"
        directory = models_base_dir(p.models, cfg.root)
        if not directory.is_dir():
            messages.append(
                _error(
                    "V003",
                    f"models directory {directory} of pipeline '{name}' (models = \"{p.models}\") does not "
                    "exist; create it or fix models",
                    field,
                )
            )
            continue
        try:
            model_set = load_models(p.models, cfg.root, env)
        except CircularDependencyError as exc:
            messages.append(_error("V004", str(exc), field))
        except UnknownDependencyError as exc:
            messages.append(_error("V005", str(exc), field))
        except RockyError as exc:
            messages.append(_error("V013", str(exc), field))
        else:
            names.update(model_set.models)
            budgets = [m.max_lag_seconds for m in model_set.models.values() if m.max_lag_seconds is not None]
            lags[p.models] = min(budgets) if budgets else None
    messages.extend(_transformation_freshness(cfg, lags))
    return messages, len(names)


def _transformation_freshness(
    cfg: RockyConfig, lags: Mapping[str, int | None]
) -> Iterator[ValidationMessage]:
    """V016 for a ``freshness = true`` transformation schedule that no model and no default budget covers.

    The scheduler takes the smallest model ``max_lag_seconds``, else ``[freshness] expected_lag_seconds``;
    with neither, every tick reports ``config_error`` and the pipeline never fires.
    """
    if cfg.freshness.expected_lag_seconds is not None:
        return
    for name, p in cfg.pipelines.items():
        if not isinstance(p, TransformationPipeline) or p.schedule is None or not p.schedule.freshness:
            continue
        if p.models not in lags or lags[p.models] is not None:
            continue  # models that do not load are reported already; a model budget covers it
        yield _warning(
            "V016",
            f"pipeline '{name}' has freshness = true but no budget: no model sets freshness.max_lag_seconds "
            "and [freshness] expected_lag_seconds is not set, so it never becomes due; set one of them",
            f"pipeline.{name}.schedule.freshness",
        )


# --- the command result ---------------------------------------------------------------------------------


class ValidateOutput(ValidateResult, Result):
    """``rocky validate`` (CONTRACT section 8), rendered; exit 1 on any error-severity message."""

    def exit_code(self) -> int:
        return 0 if self.valid else 1

    def _counts(self) -> str:
        errors = sum(m.severity == "error" for m in self.messages)
        warnings = len(self.messages) - errors
        return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"

    def render_table(self) -> str:
        if self.valid:
            head = (
                f"✓ config valid: {len(self.adapters)} adapter(s), {len(self.pipelines)} pipeline(s), "
                f"{self.models.count} model(s)"
            )
        else:
            head = f"✗ config invalid ({self._counts()})"
        lines = [head]
        for m in self.messages:
            where = f" [{m.field}]" if m.field else ""
            lines.append(f"  {m.severity:<7} {m.code}{where}: {m.message}")
        return "\n".join(lines) + "\n"

    def render_md(self) -> str:
        head = "**config valid**" if self.valid else f"**config invalid** ({self._counts()})"
        if not self.messages:
            return head + "\n"
        rows = [[m.severity, m.code, m.field or "", m.message] for m in self.messages]
        return head + "\n\n" + md_table(["severity", "code", "field", "message"], rows)


def run_validation(
    config_path: Path,
    env: Mapping[str, str] | None = None,
    *,
    adjust: Callable[[RockyConfig], object] | None = None,
) -> ValidateOutput:
    """Everything ``rocky validate`` does: load, cross-check, load the models; never raises ConfigError.

    Args:
        adjust: applied to the loaded config before it is checked (``rocky ci --models DIR`` points the
            transformation pipeline elsewhere, and the models checked must be those it will build).
    """
    from rocky_engine.config.loader import load_config
    from rocky_engine.errors import ConfigError

    try:
        cfg = load_config(config_path, env=env)
    except ConfigError as exc:
        return ValidateOutput(valid=False, messages=[_error("V001", str(exc), exc.key)])
    if adjust is not None:
        adjust(cfg)
    messages = validate_config(cfg)
    from rocky_engine.models import models_base_dir

    model_messages, model_count = validate_models(cfg, env)
    messages.extend(model_messages)
    failed = [m.field or "" for m in messages if m.severity == "error"]
    return ValidateOutput(
        valid=not failed,
        messages=messages,
        adapters=[
            AdapterSummary(name=n, adapter_type=a.type, ok=not _about(failed, f"adapter.{n}"))
            for n, a in cfg.adapters.items()
        ],
        pipelines=[
            pipeline_summary(n, p, ok=not _about(failed, f"pipeline.{n}")) for n, p in cfg.pipelines.items()
        ],
        models=ModelsSummary(
            count=model_count,
            found=any(models_base_dir(p.models, cfg.root).is_dir() for p in cfg.pipelines.values()
                      if isinstance(p, TransformationPipeline)),
            dag_valid=not any(m.code in ("V004", "V005") for m in model_messages),
        ),
    )


def _about(fields: list[str], prefix: str) -> bool:
    return any(f == prefix or f.startswith(prefix + ".") for f in fields)


def pipeline_summary(name: str, p: PipelineConfig, *, ok: bool) -> PipelineSummary:
    """One pipeline of the validate document: its type, where it writes and how."""
    catalog = schema = ""
    strategy: str = p.type
    if isinstance(p, ReplicationPipeline):
        catalog, schema, strategy = p.target.catalog_template, p.target.schema_template, p.strategy
    else:
        target = getattr(p, "target", None)
        catalog = str(getattr(target, "catalog", None) or "")
        schema = str(getattr(target, "schema_", None) or "")
    return PipelineSummary(name=name, type=p.type, ok=ok, catalog_template=catalog, schema_template=schema,
                           strategy=strategy)
