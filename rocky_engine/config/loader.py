"""Load rocky.toml: read, substitute ``${VAR}``, parse TOML, normalize shorthands, build typed models.

Each table is validated on its own with the key path it came from, so an error names
``pipeline.orders.execution.concurency`` rather than pydantic's location inside a tagged union.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rocky_engine.config.adapters import (
    ADAPTER_CLASSES,
    ADAPTER_TYPES,
    REFUSED_ADAPTER_TYPES,
    WAREHOUSE_TYPES,
)
from rocky_engine.config.connectors import ConnectorConfig
from rocky_engine.config.envsubst import substitute
from rocky_engine.config.error_format import Loc, dotted, translate
from rocky_engine.config.hooks import HOOK_EVENTS, CommandHook, HookConfig, WebhookHook, unknown_event_warning
from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import PIPELINE_CLASSES, PIPELINE_TYPES
from rocky_engine.config.secrets import config_secrets
from rocky_engine.config.sections import FreshnessDefaults, ScheduleDefaults, StateConfig
from rocky_engine.config.toml_file import parse_toml, read_text
from rocky_engine.config.unknown_keys import unknown_key_warnings
from rocky_engine.errors import ConfigError, one_line
from rocky_engine.redact import set_known

M = TypeVar("M", bound=BaseModel)

#: Top-level keys this engine reads; anything else is ignored with a warning.
TOP_LEVEL_KEYS = (
    "adapter",
    "adapters",
    "pipeline",
    "pipelines",
    "schedule",
    "freshness",
    "state",
    "hook",
    "connector",
    "connectors",
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
# Sub-tables that only a pipeline has: a bare [pipeline] holding them is the single-pipeline shorthand.
_PIPELINE_TABLES = frozenset({"source", "target", "checks", "execution", "schedule"})


def load_config(path: Path, *, env: Mapping[str, str] | None = None) -> RockyConfig:
    """Load and validate the rocky.toml at ``path``.

    Args:
        path: the config file (relative paths are taken from the current directory).
        env: variables for ``${VAR}`` substitution; defaults to the process environment.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML, or a key is wrong; the message names the
            file, the key and what to do.
    """
    given = Path(path)
    file = Path(os.path.abspath(given.expanduser()))
    if not file.exists():
        raise ConfigError(f"config file not found: {given}", hint="create it or pass -c/--config PATH")
    if file.is_dir():
        raise ConfigError(
            f"config path {given} is a directory",
            hint="pass the rocky.toml file itself with -c/--config PATH",
        )
    raw_text = read_text(file, label="config file")
    variables = os.environ if env is None else env
    text = substitute(raw_text, variables, file=file)
    # Parsing and validating allocate tens of thousands of objects on a large project (1,000 pipelines),
    # all of which stay alive: the cyclic collector would walk them again and again for nothing (~15% of
    # loading). It is paused for this bounded stretch only, and left as it was found.
    paused = gc.isenabled()
    gc.disable()
    try:
        raw = parse_toml(text, file=file)
        config = build_config(raw, file=file, config_hash="")
    finally:
        if paused:
            gc.enable()
    # Every surface that writes text redacts the secrets of the project loaded last (rocky_engine/redact.py).
    secrets = config_secrets(config, raw_text, variables)
    set_known(secrets)
    # Hashed with each secret replaced by its name: a run record's hash cannot confirm a guessed secret.
    config.config_hash = hashlib.sha256(secrets(text).encode("utf-8")).hexdigest()
    return config


def build_config(raw: dict[str, Any], *, file: Path, config_hash: str) -> RockyConfig:
    """Build a :class:`RockyConfig` from parsed TOML (after substitution)."""
    warnings: list[str] = []
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            warnings.append(_unknown_top_level(key, file))

    adapters: dict[str, Any] = {}
    for name, (prefix, data) in _named_tables(raw, "adapter", _adapter_shorthand, file).items():
        adapters[name] = _adapter(name, prefix, data, file)
        warnings.extend(unknown_key_warnings(adapters[name], prefix))

    pipelines: dict[str, Any] = {}
    for name, (prefix, data) in _named_tables(raw, "pipeline", _pipeline_shorthand, file).items():
        pipelines[name] = _pipeline(name, prefix, data, file)
        warnings.extend(unknown_key_warnings(pipelines[name], prefix))

    connectors: dict[str, ConnectorConfig] = {}
    for name, (prefix, data) in _named_tables(raw, "connector", lambda _t: False, file).items():
        connector = _validate(ConnectorConfig, data, prefix, file)
        _check_connector_target(name, connector, adapters, prefix, file)
        connectors[name] = connector

    hook, hook_warnings = _hooks(raw.get("hook", {}), file)
    warnings.extend(hook_warnings)
    schedule = _validate(ScheduleDefaults, raw.get("schedule", {}), ("schedule",), file)
    freshness = _validate(FreshnessDefaults, raw.get("freshness", {}), ("freshness",), file)
    warnings.extend(unknown_key_warnings(freshness, ("freshness",)))

    state = _validate(StateConfig, raw.get("state", {}), ("state",), file)
    # Every part was validated above; validating the whole again would re-run each pipeline's validators
    # (a second full pass over 1,000 pipelines), so the config is assembled without validation.
    return RockyConfig.model_construct(
        path=file,
        root=file.parent,
        config_hash=config_hash,
        adapters=adapters,
        pipelines=pipelines,
        schedule=schedule,
        freshness=freshness,
        state=state,
        hook=hook,
        connectors=connectors,
        # a warning quotes the key it is about, which may hold any character a TOML quoted key can
        warnings=[one_line(w) for w in warnings],
    )


def _validate(cls: type[M], data: Any, prefix: Loc, file: Path) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise translate(exc, file=file, prefix=prefix) from None


def _unknown_top_level(key: str, file: Path) -> str:
    import difflib  # only for a misspelt key: a clean config never needs it

    close = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
    hint = f" (did you mean [{close[0]}]?)" if close else ""
    return f"unknown top-level key '{key}' in {file.name} ignored{hint}"


# --- named tables and shorthands ------------------------------------------------------------------------


def _adapter_shorthand(table: dict[str, Any]) -> bool:
    return isinstance(table.get("type"), str)


def _pipeline_shorthand(table: dict[str, Any]) -> bool:
    if isinstance(table.get("type"), str):
        return True
    # Named pipelines are tables; a scalar or list value can only be a key of one unnamed pipeline.
    return any(not isinstance(v, dict) for v in table.values()) or bool(_PIPELINE_TABLES & set(table))


def _named_tables(
    raw: dict[str, Any], kind: str, is_shorthand: Callable[[dict[str, Any]], bool], file: Path
) -> dict[str, tuple[Loc, Any]]:
    """Merge ``[kind.X]``, ``[kinds.X]`` and the bare ``[kind]`` shorthand into name -> (key path, table)."""
    merged: dict[str, tuple[Loc, Any]] = {}
    for key in (kind, f"{kind}s"):
        if key not in raw:
            continue
        table = raw[key]
        if not isinstance(table, dict):
            raise ConfigError(
                f"[{key}] must be a table of named {kind}s ([{key}.NAME])",
                file=file,
                key=key,
                hint=f"write [{kind}.<name>] tables",
            )
        entries: dict[str, tuple[Loc, Any]]
        if is_shorthand(table):
            _reject_mixed_shorthand(table, key, kind, file)
            entries = {"default": ((key,), table)}
        else:
            entries = {name: ((key, name), value) for name, value in table.items()}
        for name, (prefix, value) in entries.items():
            if name in merged:
                raise ConfigError(
                    f"{kind} '{name}' is defined twice ([{dotted(merged[name][0])}] and [{dotted(prefix)}])",
                    file=file,
                    key=dotted(prefix),
                    hint="keep one definition",
                )
            if not _NAME.match(name):
                raise ConfigError(
                    f"{kind} name '{name}' is invalid",
                    file=file,
                    key=dotted(prefix),
                    hint="use letters, digits, '_' and '-' (not starting with '-')",
                )
            if not isinstance(value, dict):
                raise ConfigError(
                    f"[{dotted(prefix)}] must be a table",
                    file=file,
                    key=dotted(prefix),
                    hint=f"write [{key}.{name}] with its keys below it",
                )
            merged[name] = (prefix, value)
    return merged


def _reject_mixed_shorthand(table: dict[str, Any], key: str, kind: str, file: Path) -> None:
    # TOML lets [adapter] and [adapter.pg] coexist; read as the shorthand, [adapter.pg] would silently
    # become an ignored key of the default adapter.
    named = [name for name, value in table.items() if isinstance(value, dict) and "type" in value]
    if named:
        raise ConfigError(
            f"[{key}] mixes an unnamed {kind} (the shorthand with `type`) "
            f"with named ones ([{key}.{named[0]}])",
            file=file,
            key=key,
            hint=f"rename the unnamed one to [{key}.default]",
        )


# --- adapters, pipelines, connectors --------------------------------------------------------------------


def _adapter(name: str, prefix: Loc, data: dict[str, Any], file: Path) -> Any:
    valid = ", ".join(ADAPTER_TYPES)
    kind = data.get("type")
    if kind is None:
        raise ConfigError(
            f"missing required key 'type' in [{dotted(prefix)}]; valid types: {valid}",
            file=file,
            key=dotted([*prefix, "type"]),
            hint="add it",
        )
    if isinstance(kind, str) and kind.lower() in REFUSED_ADAPTER_TYPES:
        raise ConfigError(
            f"{REFUSED_ADAPTER_TYPES[kind.lower()]} (adapter '{name}')",
            file=file,
            key=dotted([*prefix, "type"]),
            hint=f"use one of: {valid}",
        )
    if not isinstance(kind, str) or kind not in ADAPTER_CLASSES:
        raise ConfigError(
            f"unknown adapter type {kind!r} for adapter '{name}'; valid types: {valid}",
            file=file,
            key=dotted([*prefix, "type"]),
        )
    return _validate(ADAPTER_CLASSES[kind], data, prefix, file)


def _pipeline(name: str, prefix: Loc, data: dict[str, Any], file: Path) -> Any:
    kind = data.get("type", "replication")
    if not isinstance(kind, str) or kind not in PIPELINE_CLASSES:
        raise ConfigError(
            f"unknown pipeline type {kind!r} for pipeline '{name}'; valid types: {', '.join(PIPELINE_TYPES)}",
            file=file,
            key=dotted([*prefix, "type"]),
        )
    return _validate(PIPELINE_CLASSES[kind], data, prefix, file)


def _check_connector_target(
    name: str, connector: ConnectorConfig, adapters: dict[str, Any], prefix: Loc, file: Path
) -> None:
    # An unknown adapter name is reported by `rocky validate` (V002) like every other reference; a known
    # adapter that cannot receive local Parquet files is refused here, at load time.
    adapter = adapters.get(connector.target.adapter)
    if adapter is not None and adapter.type not in WAREHOUSE_TYPES:
        raise ConfigError(
            f"connector '{name}' targets adapter '{connector.target.adapter}' of type '{adapter.type}', "
            "which cannot receive rows",
            file=file,
            key=dotted([*prefix, "target", "adapter"]),
            hint="point target.adapter at a duckdb or postgres adapter",
        )


# --- hooks ----------------------------------------------------------------------------------------------


def _hooks(raw: Any, file: Path) -> tuple[HookConfig, list[str]]:
    if not isinstance(raw, dict):
        raise ConfigError(
            "[hook] must be a table", file=file, key="hook", hint="write [[hook.on_<event>]] tables"
        )
    warnings: list[str] = []
    commands: dict[str, list[CommandHook]] = {}
    webhooks: dict[str, WebhookHook] = {}
    for key, value in raw.items():
        if key == "webhooks":
            webhooks = _webhooks(value, file, warnings)
        elif key.startswith("on_"):
            event = key[3:]
            if event not in HOOK_EVENTS:
                warnings.append(unknown_event_warning(key, "hook"))
                continue
            items = [value] if isinstance(value, dict) else value
            if not isinstance(items, list):
                raise ConfigError(
                    f"[[hook.{key}]] must be a table or an array of tables",
                    file=file,
                    key=f"hook.{key}",
                    hint=f'write [[hook.{key}]] with command = "..." below it',
                )
            commands[event] = []
            for i, item in enumerate(items):
                commands[event].append(_validate(CommandHook, item, ("hook", key, i), file))
                warnings.extend(unknown_key_warnings(commands[event][-1], ("hook", key, i)))
        else:
            warnings.append(f"unknown key '{key}' in [hook] ignored; hook keys are on_<event> and webhooks")
    return HookConfig(commands=commands, webhooks=webhooks), warnings


def _webhooks(raw: Any, file: Path, warnings: list[str]) -> dict[str, WebhookHook]:
    if not isinstance(raw, dict):
        raise ConfigError(
            "[hook.webhooks] must be a table",
            file=file,
            key="hook.webhooks",
            hint="write [hook.webhooks.on_<event>] tables",
        )
    out: dict[str, WebhookHook] = {}
    for key, value in raw.items():
        event = key.removeprefix("on_")
        if not key.startswith("on_") or event not in HOOK_EVENTS:
            warnings.append(unknown_event_warning(key, "hook.webhooks"))
            continue
        out[event] = _validate(WebhookHook, value, ("hook", "webhooks", key), file)
        warnings.extend(unknown_key_warnings(out[event], ("hook", "webhooks", key)))
    return out
