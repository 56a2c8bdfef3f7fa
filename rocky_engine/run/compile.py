"""Compile a model to the SELECT the warehouse runs: variables rendered, model references qualified.

A bare reference to another model becomes that model's fully qualified target name; a reference to an
ephemeral model is resolved by a CTE prepended to the statement (ephemeral models never materialize).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from rocky_engine.adapters.base import TableName
from rocky_engine.models.dag import ModelSet
from rocky_engine.models.sql_refs import render_vars, strip_trailing_semicolon

# A leading WITH, after any comments: the ephemeral CTEs join that list instead of starting a second one.
_LEADING_WITH = re.compile(
    r"^(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*with\b\s*(?:recursive\b\s*)?", re.IGNORECASE | re.DOTALL
)


def compile_model(
    name: str,
    model_set: ModelSet,
    targets: Mapping[str, TableName],
    variables: Mapping[str, str],
    quote: Callable[[str], str],
) -> str:
    """The executable SELECT of model ``name``; ``quote`` is the warehouse dialect's (ephemeral CTE names).

    Raises:
        ModelError: a ``{{ var() }}`` has no value.
    """
    body, ephemerals = _rewrite(name, model_set, targets, variables, quote)
    if not ephemerals:
        return body
    ctes: list[str] = []
    done: set[str] = set()

    def add(eph: str) -> None:
        if eph in done:
            return
        done.add(eph)
        eph_body, nested = _rewrite(eph, model_set, targets, variables, quote)
        for inner in nested:
            add(inner)
        ctes.append(f"{quote(eph)} AS ({eph_body})")

    for eph in ephemerals:
        add(eph)
    prefix = ", ".join(ctes)
    match = _LEADING_WITH.match(body)
    if match:
        return f"{match.group(0)}{prefix}, {body[match.end():]}"
    return f"WITH {prefix} {body}"


def _rewrite(
    name: str,
    model_set: ModelSet,
    targets: Mapping[str, TableName],
    variables: Mapping[str, str],
    quote: Callable[[str], str],
) -> tuple[str, list[str]]:
    model = model_set.models[name]
    sql = model.sql
    refs = model_set.refs.get(name, [])
    ephemerals: list[str] = []
    if refs:
        lower = {n.lower(): n for n in model_set.models}
        pieces: list[str] = []
        cursor = 0
        for ref in refs:
            dep = lower[ref.name.lower()]
            if dep == name and model.strategy.type == "ephemeral":
                continue
            pieces.append(sql[cursor : ref.start])
            # A model naming itself reads its own target (incremental: "WHERE ts > (SELECT max(ts) FROM
            # me)"), wherever [target] puts it.
            if model_set.models[dep].strategy.type == "ephemeral":
                pieces.append(quote(dep))
                if dep not in ephemerals:
                    ephemerals.append(dep)
            else:
                pieces.append(targets[dep].qualified)
            cursor = ref.end
        pieces.append(sql[cursor:])
        sql = "".join(pieces)
    sql = render_vars(sql, variables, model=name)
    return strip_trailing_semicolon(sql), ephemerals
