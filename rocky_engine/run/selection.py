"""``rocky run --model``: which models of a transformation pipeline one invocation builds.

Each ``--model`` is a selector: ``NAME`` (that model), ``+NAME`` (it and every model it reads, directly or
not), ``NAME+`` (it and every model that reads it), ``+NAME+`` (both). The selection is the union of the
selectors, run in the pipeline's DAG order in one process, so an orchestrator materializing a subset of
assets starts one ``rocky`` per subset instead of one per model. An unknown name is refused before
anything runs (one line naming it); an ephemeral model named on its own is refused, since it is never
materialized (in a ``+`` expansion it is simply inlined into the models that read it).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from rocky_engine.errors import UsageError
from rocky_engine.models.dag import ModelSet


def select_models(model_set: ModelSet, selectors: Sequence[str], pipeline: str) -> list[str]:
    """The selected model names in DAG order; every model when ``selectors`` is empty.

    Raises:
        UsageError: a selector names no model of the pipeline, or names an ephemeral model on its own.
    """
    if not selectors:
        return list(model_set.order)
    chosen: set[str] = set()
    for selector in selectors:
        upstream = selector.startswith("+")
        downstream = selector.endswith("+") and len(selector) > 1
        name = selector[1 if upstream else 0 : len(selector) - (1 if downstream else 0)]
        _known(model_set, name, selector, pipeline)
        chosen.add(name)
        if upstream:
            chosen |= model_set.upstream(name)
        if downstream:
            chosen |= model_set.downstream(name)
        if not (upstream or downstream) and model_set.models[name].strategy.type == "ephemeral":
            users = ", ".join(model_set.dependents.get(name, [])) or "no model"
            raise UsageError(
                f"--model '{name}' is ephemeral: it is inlined into the models that use it ({users}) and "
                "never materialized on its own",
                hint="run one of those models instead",
            )
    return [name for name in model_set.order if name in chosen]


def _known(model_set: ModelSet, name: str, selector: str, pipeline: str) -> None:
    if name in model_set.models:
        return
    if not name:
        raise UsageError(f"--model '{selector}' names no model",
                         hint="write NAME, +NAME (with its upstream) or NAME+ (with its downstream)")
    close = difflib.get_close_matches(name, list(model_set.models), n=1)
    hint = f"did you mean '{close[0]}'?" if close else "run `rocky validate` to list the models"
    raise UsageError(f"--model '{name}' is not a model of pipeline '{pipeline}'", hint=hint)
