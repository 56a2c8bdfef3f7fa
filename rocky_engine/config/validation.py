"""Cross-reference checks behind ``rocky validate``: what loading alone cannot see.

Loading (``load_config``) proves each table is well-formed; this module checks that the tables agree with
each other and with the machine (cron expressions, time zones). The model files (V003-V005, V013 and the
transformation case of V016) and V021 are checked by ``ops``, which sits above ``models`` in the layers.
Every finding is a :class:`ValidationMessage` with a stable code, so scripts can match on codes rather
than on wording.

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
V019  error     a connector manifest cannot be loaded: the file is missing, unreadable or not TOML, or it
                breaks a manifest rule (unknown key, missing ``egress_hosts``, ``protocol_version`` not 0,
                ...); the loader of ``rocky load --connector`` decides, so both refuse the same manifests
V020  warning   the project defines no pipelines and no connectors
V021  error     a merge asks to be atomic (``atomic_merges``, ``[strategy] atomic``) on an adapter whose
                declared capability level has no MERGE (``ops.validate_atomic``)
====  ========  ==============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rocky_engine.config.adapters import WAREHOUSE_TYPES
from rocky_engine.config.connector_manifest import load_manifest
from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import (
    LoadPipeline,
    QualityPipeline,
    ReplicationPipeline,
    SnapshotPipeline,
    TransformationPipeline,
)

# re-exported: callers and tests import these from here
from rocky_engine.config.schedule_syntax import cron_problem as cron_problem
from rocky_engine.config.schedule_syntax import timezone_problem as timezone_problem
from rocky_engine.errors import ConfigError
from rocky_engine.graph import find_cycles
from rocky_engine.wire.validate import (
    ValidationMessage,
)

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def error_message(code: str, message: str, field: str | None = None) -> ValidationMessage:
    return ValidationMessage(severity="error", code=code, message=message, field=field)


def warning_message(code: str, message: str, field: str | None = None) -> ValidationMessage:
    return ValidationMessage(severity="warning", code=code, message=message, field=field)


def validate_config(cfg: RockyConfig) -> list[ValidationMessage]:
    """Every cross-reference problem of a loaded config (model files are checked by validate_models)."""
    messages = [warning_message("V012", warning, _warning_field(warning)) for warning in cfg.warnings]
    if not cfg.pipelines and not cfg.connectors:
        messages.append(
            warning_message("V020", "no pipelines or connectors are defined; add a [pipeline.<name>] table")
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
            yield error_message(
                "V002",
                f"{field} names adapter '{ref}', which is not defined; defined adapters: {defined}. "
                f"Add an [adapter.{ref}] table or use a defined name",
                field,
            )
        elif role == "warehouse" and adapter.type not in WAREHOUSE_TYPES:
            yield error_message(
                "V014",
                f"{field} names adapter '{ref}' of type '{adapter.type}', which only discovers sources; "
                "use a duckdb, postgres or spark adapter here",
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
                yield error_message(
                    "V011",
                    f"pipeline '{name}' depends_on '{dep}', which is not a pipeline; "
                    f"pipelines: {', '.join(sorted(cfg.pipelines))}",
                    f"pipeline.{name}.depends_on",
                )
    for members in find_cycles(graph):
        yield error_message(
            "V015",
            f"depends_on cycle detected involving: {members}; remove one of those depends_on entries",
            f"pipeline.{members[0]}.depends_on",
        )


# --- schedules ------------------------------------------------------------------------------------------


def _schedules(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    problem = timezone_problem(cfg.schedule.timezone)
    if problem:
        yield error_message("V007", f"[schedule] {problem}", "schedule.timezone")
    after_graph: dict[str, list[str]] = {}
    for name, p in cfg.pipelines.items():
        sched = p.schedule
        if sched is None:
            continue
        base = f"pipeline.{name}.schedule"
        if isinstance(p, LoadPipeline):
            yield error_message(
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
                yield error_message("V006", f"pipeline '{name}': {problem}", f"{base}.cron")
        if sched.timezone is not None:
            problem = timezone_problem(sched.timezone)
            if problem:
                yield error_message("V007", f"pipeline '{name}': {problem}", f"{base}.timezone")
        after_graph[name] = []
        for upstream in sched.after:
            target = cfg.pipelines.get(upstream)
            if target is None:
                yield error_message(
                    "V008",
                    f"pipeline '{name}' schedule after names '{upstream}', which is not a pipeline; "
                    f"pipelines: {', '.join(sorted(cfg.pipelines))}",
                    f"{base}.after",
                )
            elif isinstance(target, LoadPipeline):
                yield error_message(
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
            yield warning_message(
                "V016",
                f"pipeline '{name}' has freshness = true but no budget; set [freshness] expected_lag_seconds",
                f"{base}.freshness",
            )
    for members in find_cycles(after_graph):
        yield error_message(
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
                yield error_message(
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
                    yield error_message(
                        "V017",
                        f"pipeline '{name}': target.{key} uses {{{placeholder}}}, which is not a source "
                        f"schema_pattern component; components: {', '.join(names) or '(none)'}",
                        f"pipeline.{name}.target.{key}",
                    )


def _state(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    state = cfg.state
    if state.backend == "gcs":
        yield error_message(
            "V018",
            "state backend 'gcs' is not supported yet; use local, s3, valkey or tiered",
            "state.backend",
        )
    if state.backend in ("s3", "tiered") and not state.s3_bucket:
        yield error_message("V018", f"state backend '{state.backend}' needs s3_bucket", "state.s3_bucket")
    if state.backend in ("valkey", "tiered") and not state.valkey_url:
        yield error_message("V018", f"state backend '{state.backend}' needs valkey_url", "state.valkey_url")


def _connectors(cfg: RockyConfig) -> Iterator[ValidationMessage]:
    # The loader `rocky load --connector` uses, so validate refuses exactly what the load would, in its
    # words (file, key and fix); prefixed with the connector, since several may share one manifest name.
    for name, c in cfg.connectors.items():
        try:
            load_manifest(c.manifest_path(cfg.root), connector=name)
        except ConfigError as exc:
            yield error_message("V019", f"connector '{name}': {exc}", f"connector.{name}.manifest")
