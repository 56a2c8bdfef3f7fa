"""Everything a connector run checks before anything starts: config, manifest, secrets, target, program.

A problem found here stops the run with a ``ConfigError`` before the state is read, the batch claimed or
the program started (seeds/child-connectors.md: "An unset variable stops the run before anything
starts").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.config.connector_manifest import LoadedManifest, load_manifest
from rocky_engine.config.connectors import ConnectorConfig
from rocky_engine.connectors.contract import Contract, parse_contract
from rocky_engine.connectors.limits import EffectiveLimits, effective_limits
from rocky_engine.connectors.manifest import resolve_command
from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.project import Project


@dataclass(frozen=True)
class ConnectorPlan:
    """A connector ready to run."""

    name: str
    config: ConnectorConfig
    manifest: LoadedManifest
    limits: EffectiveLimits
    contract: Contract | None
    #: declared secret name -> value from Rocky's environment
    secrets: dict[str, str]
    #: the program and its arguments, the first element absolute
    argv: list[str]
    #: the directory of ``output_uri``; scratch directories are made in it
    output_dir: Path
    #: Rocky's environment, the source of PATH and LANG for the program
    parent_env: Mapping[str, str]

    @property
    def egress_hosts(self) -> list[str]:
        return list(self.manifest.manifest.egress_hosts)

    @property
    def state_schema_version(self) -> int:
        return self.manifest.manifest.state_schema_version


def plan_connector(project: Project, name: str, env: Mapping[str, str]) -> ConnectorPlan:
    """Check connector ``name`` of ``project`` and resolve what its run needs.

    Raises:
        ConfigError: unknown connector, bad manifest or contract, an unset secret, a target this release
            cannot load into, or a program that cannot be found.
    """
    config = project.config
    cfg = config.connector(name)
    file = config.path
    manifest = load_manifest(cfg.manifest_path(project.root), connector=name)
    contract = parse_contract(cfg.contract, connector=name, file=file)
    missing = [s for s in cfg.secrets if s not in env]
    if missing:
        several = len(missing) > 1
        raise ConfigError(
            f"connector '{name}' declares secret{'s' * several} {', '.join(missing)}, which "
            f"{'are' if several else 'is'} not set in rocky's environment",
            file=file,
            key=f"connector.{name}.secrets",
            hint=f"export {'them' if several else 'it'} before running rocky (an unset secret stops the run "
            "before anything starts)",
        )
    _check_target(project, name, cfg)
    argv = resolve_command(manifest, env.get("PATH"))
    return ConnectorPlan(
        name=name,
        config=cfg,
        manifest=manifest,
        limits=effective_limits(manifest.manifest.limits, cfg.limits),
        contract=contract,
        secrets={s: env[s] for s in cfg.secrets},
        argv=argv,
        output_dir=cfg.output_dir(project.root).absolute(),
        parent_env=env,
    )


def _check_target(project: Project, name: str, cfg: ConnectorConfig) -> None:
    from rocky_engine.adapters.registry import dialect_of

    config = project.config
    target = cfg.target
    adapter = config.adapter(target.adapter)
    key = f"connector.{name}.target"
    if not dialect_of(config, target.adapter).capabilities.reads_local_files:
        raise ConfigError(
            f"connector '{name}' targets adapter '{target.adapter}' of type '{adapter.type}'; this release "
            "loads connector batches into DuckDB only (it stages the Parquet files with read_parquet)",
            file=config.path,
            key=f"{key}.adapter",
            hint="load into a DuckDB adapter and replicate onward",
        )
    catalog = getattr(adapter, "catalog", None)
    if catalog is not None and target.catalog != catalog:
        raise ConfigError(
            f"connector '{name}' targets catalog '{target.catalog}', but adapter '{target.adapter}' is "
            f"catalog '{catalog}'",
            file=config.path,
            key=f"{key}.catalog",
            hint=f"set catalog = \"{catalog}\" (a DuckDB catalog is the file stem of its path)",
        )
