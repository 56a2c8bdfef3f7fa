"""``rocky validate``: the cross-checks of ``config.validation`` plus the model files, the atomic merge
requests against the declared capability levels (V021, ``ops.validate_atomic``), and the document.

Above ``models`` in the layers (it loads the model files to report V003-V005/V013), so it lives in ``ops``
rather than beside the config checks it calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.config.model import RockyConfig
from rocky_engine.config.pipelines import PipelineConfig, ReplicationPipeline, TransformationPipeline
from rocky_engine.config.validation import error_message, validate_config, warning_message
from rocky_engine.output import Result, md_table
from rocky_engine.wire.validate import (
    AdapterSummary,
    ModelsSummary,
    PipelineSummary,
    ValidateResult,
    ValidationMessage,
)

if TYPE_CHECKING:
    from rocky_engine.models.dag import ModelSet

# --- models ---------------------------------------------------------------------------------------------


def validate_models(
    cfg: RockyConfig, env: Mapping[str, str] | None = None, *, loaded: dict[str, ModelSet] | None = None
) -> tuple[list[ValidationMessage], int]:
    """Load the models of every transformation pipeline; returns the findings and the model count.

    Args:
        loaded: filled with the model sets that loaded, by ``models`` glob (for the checks that read them).
    """
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
                error_message(
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
            messages.append(error_message("V004", str(exc), field))
        except UnknownDependencyError as exc:
            messages.append(error_message("V005", str(exc), field))
        except RockyError as exc:
            messages.append(error_message("V013", str(exc), field))
        else:
            if loaded is not None:
                loaded[p.models] = model_set
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
        yield warning_message(
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
        return ValidateOutput(valid=False, messages=[error_message("V001", str(exc), exc.key)])
    if adjust is not None:
        adjust(cfg)
    messages = validate_config(cfg)
    from rocky_engine.models import models_base_dir
    from rocky_engine.ops.validate_atomic import atomic_merge_messages

    model_sets: dict[str, ModelSet] = {}
    model_messages, model_count = validate_models(cfg, env, loaded=model_sets)
    messages.extend(model_messages)
    messages.extend(atomic_merge_messages(cfg, model_sets))
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
