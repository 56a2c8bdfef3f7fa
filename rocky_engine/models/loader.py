"""Load the model files of a transformation pipeline: ``.sql`` bodies, ``.toml`` sidecars, defaults.

``models/_defaults.toml`` supplies ``[target]`` and ``[strategy]`` defaults; each sidecar may set ``name``,
``depends_on``, ``[strategy]``, ``[target]`` and ``freshness``. Sidecars get ``${VAR}`` substitution; SQL
bodies never do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocky_engine.errors import ConfigError, ModelError
from rocky_engine.models.dag import ModelSet, build_model_set
from rocky_engine.models.model import STRATEGY_TYPES, Model, ModelTarget, Strategy

_SIDECAR_KEYS = frozenset(
    {"name", "depends_on", "strategy", "target", "freshness", "description", "owners", "tags"}
)
_STRATEGY_KEYS = frozenset(
    {"type", "timestamp_column", "unique_key", "update_columns", "partition_by", "atomic"}
)
_TARGET_KEYS = frozenset({"catalog", "schema", "table"})
_FRESHNESS_KEYS = frozenset({"max_lag_seconds"})
_DEFAULT_TARGET_KEYS = frozenset({"catalog", "schema"})  # a shared table name would be a collision
#: _defaults.toml supplies [target] (CONTRACT section 2) and, as upstream Rocky does, [strategy] defaults
_DEFAULTS_KEYS = frozenset({"target", "strategy"})
_GLOB_CHARS = frozenset("*?[")


def models_base_dir(models_glob: str, root: Path) -> Path:
    """The directory part of a models glob (``models/**`` -> ``<root>/models``)."""
    parts: list[str] = []
    for part in Path(models_glob).parts:
        if _GLOB_CHARS & set(part):
            break
        parts.append(part)
    base = Path(*parts) if parts else Path(".")
    return base if base.is_absolute() else root / base


def load_models(models_glob: str, root: Path, env: Mapping[str, str] | None = None) -> ModelSet:
    """Load every model under ``models_glob`` (relative to ``root``) and build the DAG.

    Raises:
        ModelError: the directory is missing, a file cannot be read, a sidecar is invalid, two models
            share a name, a dependency is unknown or the DAG has a cycle.
    """
    base = models_base_dir(models_glob, root)
    if not base.is_dir():
        raise ModelError(
            f"models directory {base} does not exist",
            hint="create it, or point `models` in the transformation pipeline at the right glob",
        )
    environ = os.environ if env is None else env
    sql_files = _matching_sql_files(models_glob, root, base)
    defaults_cache: dict[Path, dict[str, Any]] = {}
    models: dict[str, Model] = {}
    for sql_path in sql_files:
        defaults = _defaults_for(sql_path.parent, base, environ, defaults_cache)
        model = _load_one(sql_path, defaults, environ)
        other = models.get(model.name)
        if other is not None:
            raise ModelError(
                f"two models are named '{model.name}': {other.path} and {model.path}",
                hint="rename one file or set a distinct `name` in its sidecar",
            )
        models[model.name] = model
    return build_model_set(models)


def _matching_sql_files(models_glob: str, root: Path, base: Path) -> list[Path]:
    pattern = models_glob.replace("\\", "/")
    if pattern.rstrip("/").endswith("**") or not (_GLOB_CHARS & set(pattern)):
        files = [p for p in base.rglob("*.sql") if p.is_file()]
    else:
        files = [p for p in root.glob(pattern) if p.suffix == ".sql" and p.is_file()]
    return sorted(files)


def _read_toml(path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    from rocky_engine.config.envsubst import substitute
    from rocky_engine.config.toml_file import parse_toml, read_text

    label = "model defaults file" if path.name == "_defaults.toml" else "model sidecar"
    return parse_toml(substitute(read_text(path, label=label), environ, file=path), file=path)


def _defaults_for(
    directory: Path, base: Path, environ: Mapping[str, str], cache: dict[Path, dict[str, Any]]
) -> dict[str, Any]:
    """``{"target": {...}, "strategy": {...}}`` defaults for models in ``directory``: every
    ``_defaults.toml`` from ``base`` down to ``directory``, the nearest one winning key by key (so
    ``models/marts/_defaults.toml`` can set the schema of every mart while ``models/_defaults.toml`` sets
    the catalog)."""
    if directory in cache:
        return cache[directory]
    inherited = (
        _defaults_for(directory.parent, base, environ, cache)
        if directory != base and base in directory.parents
        else {}
    )
    merged: dict[str, Any] = {"target": dict(inherited.get("target", {})),
                              "strategy": dict(inherited.get("strategy", {}))}
    path = directory / "_defaults.toml"
    if path.is_file():
        data = _read_toml(path, environ)
        _reject_unknown(data, _DEFAULTS_KEYS, path, "")
        target = data.get("target", {})
        if not isinstance(target, dict):
            raise ConfigError("[target] must be a table", file=path, key="target")
        _reject_unknown(target, _DEFAULT_TARGET_KEYS, path, "target.")
        merged["target"].update(target)
        strategy = data.get("strategy", {})
        if not isinstance(strategy, dict):
            raise ConfigError("[strategy] must be a table", file=path, key="strategy")
        _reject_unknown(strategy, _STRATEGY_KEYS, path, "strategy.")
        merged["strategy"] = _merge_strategy(merged["strategy"], strategy)
    cache[directory] = merged
    return merged


def _merge_strategy(default: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """A nearer ``[strategy]`` over a default one: key by key while both name the same type; a nearer table
    naming another type replaces the default whole (an inherited ``unique_key`` means nothing to it)."""
    if "type" in own and own.get("type") != default.get("type", "full_refresh"):
        return dict(own)
    return {**default, **own}


def _load_one(sql_path: Path, defaults: Mapping[str, Any], environ: Mapping[str, str]) -> Model:
    try:
        sql = sql_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read model file {sql_path}: {exc}") from exc
    if not sql.strip():
        raise ModelError(f"model file {sql_path} is empty", hint="write one SELECT statement in it")
    sidecar_path = sql_path.with_suffix(".toml")
    sidecar = _read_toml(sidecar_path, environ) if sidecar_path.is_file() else {}
    _reject_unknown(sidecar, _SIDECAR_KEYS, sidecar_path, "")
    name = str(sidecar.get("name") or sql_path.stem)
    own_strategy = sidecar.get("strategy", {})
    if not isinstance(own_strategy, dict):
        raise ConfigError("[strategy] must be a table", file=sidecar_path, key="strategy")
    default_strategy = defaults.get("strategy", {})
    strategy = _strategy(
        _merge_strategy(default_strategy, own_strategy),
        # a strategy problem is reported against the file that wrote it
        sidecar_path if own_strategy or not default_strategy else _defaults_path(sql_path.parent),
    )
    target_tbl = sidecar.get("target", {})
    if not isinstance(target_tbl, dict):
        raise ConfigError("[target] must be a table", file=sidecar_path, key="target")
    _reject_unknown(target_tbl, _TARGET_KEYS, sidecar_path, "target.")
    merged = {**defaults.get("target", {}), **target_tbl}
    target = ModelTarget(
        catalog=_opt_str(merged.get("catalog")),
        schema=_opt_str(merged.get("schema")),
        table=str(target_tbl.get("table") or name),
    )
    deps = sidecar.get("depends_on", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ConfigError("depends_on must be a list of model names", file=sidecar_path, key="depends_on")
    freshness = sidecar.get("freshness", {})
    if not isinstance(freshness, dict):
        raise ConfigError(
            "freshness must be a table", file=sidecar_path, key="freshness",
            hint="write freshness = { max_lag_seconds = 3600 }",
        )
    _reject_unknown(freshness, _FRESHNESS_KEYS, sidecar_path, "freshness.")
    lag = freshness.get("max_lag_seconds")
    if lag is not None and (not isinstance(lag, int) or isinstance(lag, bool) or lag <= 0):
        raise ConfigError(
            "max_lag_seconds must be a positive integer", file=sidecar_path, key="freshness.max_lag_seconds"
        )
    description = sidecar.get("description")
    if description is not None and not isinstance(description, str):
        raise ConfigError("description must be a string", file=sidecar_path, key="description")
    return Model(
        name=name,
        path=sql_path,
        sql=sql,
        strategy=strategy,
        target=target,
        explicit_deps=tuple(deps),
        max_lag_seconds=lag,
        description=(description or "").strip() or None,
        owners=_owners(sidecar.get("owners"), sidecar_path),
        tags=_tags(sidecar.get("tags"), sidecar_path),
    )


def _owners(value: Any, path: Path) -> tuple[str, ...]:
    """``owners = ["team:data", "ana@example.com"]`` (one string is one owner)."""
    return _strings(value, path, key="owners", message="owners must be a list of strings",
                    hint='write owners = ["team:data", "ana@example.com"]')


def _tags(value: Any, path: Path) -> dict[str, str]:
    """``tags = { layer = "mart" }``, or a list of bare tags (``["pii"]``, each with an empty value)."""
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return dict.fromkeys(value, "")
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        return {str(k): v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in value.items()}
    raise ConfigError("tags must be a table of strings or a list of strings", file=path, key="tags",
                      hint='write tags = { layer = "mart" } or tags = ["pii"]')


def _defaults_path(directory: Path) -> Path:
    """The nearest ``_defaults.toml`` at or above ``directory`` (for naming it in an error)."""
    for candidate in (directory, *directory.parents):
        if (candidate / "_defaults.toml").is_file():
            return candidate / "_defaults.toml"
    return directory / "_defaults.toml"


def _reject_unknown(table: Mapping[str, Any], allowed: frozenset[str], path: Path, prefix: str) -> None:
    """A misspelt key (``timestamp_colum``, ``schemaa``) would silently fall back to a default."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown key '{prefix}{unknown[0]}'",
            file=path,
            hint=f"valid keys{' under [' + prefix.rstrip('.') + ']' if prefix else ''}: "
            f"{', '.join(sorted(allowed))}",
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _str_tuple(value: Any, key: str, path: Path) -> tuple[str, ...]:
    return _strings(value, path, key=f"strategy.{key}", message="must be a string or a list of strings")


def _strings(value: Any, path: Path, *, key: str, message: str, hint: str | None = None) -> tuple[str, ...]:
    """A string or a list of strings as a tuple (absent: empty); anything else is a ConfigError."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(message, file=path, key=key, hint=hint)


def _strategy(raw: Any, path: Path) -> Strategy:
    if not isinstance(raw, dict):
        raise ConfigError("[strategy] must be a table", file=path, key="strategy")
    _reject_unknown(raw, _STRATEGY_KEYS, path, "strategy.")
    stype = raw.get("type", "full_refresh")
    if stype not in STRATEGY_TYPES:
        raise ConfigError(
            f"unknown strategy type '{stype}'",
            file=path,
            key="strategy.type",
            hint=f"use one of: {', '.join(STRATEGY_TYPES)}",
        )
    strategy = Strategy(
        type=stype,
        timestamp_column=_opt_str(raw.get("timestamp_column")),
        unique_key=_str_tuple(raw.get("unique_key"), "unique_key", path),
        update_columns=_str_tuple(raw.get("update_columns"), "update_columns", path),
        partition_by=_str_tuple(raw.get("partition_by"), "partition_by", path),
        atomic=_atomic(raw.get("atomic"), stype, path),
    )
    required = {"incremental": "timestamp_column", "merge": "unique_key", "delete_insert": "partition_by"}
    need = required.get(stype)
    if need and not getattr(strategy, need):
        raise ConfigError(
            f"strategy '{stype}' needs `{need}`", file=path, key=f"strategy.{need}",
            hint=f"add {need} = ... under [strategy]",
        )
    return strategy


def _atomic(value: Any, stype: str, path: Path) -> bool | None:
    """``[strategy] atomic``: a boolean, and only on a merge (the one strategy a capability level may do as
    a rewrite instead of one statement: docs/adapters.md "Capability levels")."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ConfigError("atomic must be true or false", file=path, key="strategy.atomic")
    if stype != "merge":
        raise ConfigError(
            f"atomic applies to strategy 'merge' only (this strategy is '{stype}')",
            file=path, key="strategy.atomic",
            hint="remove atomic, or set type = \"merge\" with a unique_key",
        )
    return value
