"""Find bare table references in a model's SQL and render ``{{ var('x') }}`` / ``@var(x)`` placeholders.

A model depends on every other model whose name appears as a bare (unqualified) table name in its SQL
(CONTRACT section 2). A regex scanner (strings and comments skipped; a quoted identifier is a name, never
a keyword) finds identifiers in table position: right after FROM / JOIN, or in a comma list that follows
FROM, at a parenthesis level that is a query, and not part of a dotted name or a table function call.
CTE names shadow models of the same name. The scanner is linear and allocation-light because a
10,000-model project must load in well under three seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rocky_engine.errors import ModelError

_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>--[^\n]*|/\*.*?\*/)
    | (?P<string>'(?:[^']|'')*')
    | (?P<qident>"(?:[^"]|"")*")
    | (?P<ident>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_FROM_LIST_END = frozenset(
    {
        "where", "group", "order", "having", "limit", "qualify", "window", "union", "intersect",
        "except", "offset", "fetch", "returning", "select", "set", "values",
    }
)
# First token inside "(" that makes the group a query: only there does FROM introduce tables
# (``EXTRACT(year FROM ts)`` and ``TRIM(BOTH ' ' FROM name)`` are not table positions).
_QUERY_START = frozenset({"select", "with", "from", "values", "table", "pivot", "unpivot", "("})
# Keywords after which an identifier names a table (DuckDB's ``PIVOT t ON ...`` included).
_TABLE_INTRO = frozenset({"from", "join", "pivot", "unpivot"})
# Keywords that follow FROM / JOIN but are not table names.
_NOT_TABLES = frozenset({"select", "lateral", "values", "unnest"})
_VAR = re.compile(
    r"""\{\{\s*var\(\s*(?P<q>['"])(?P<name>[A-Za-z0-9_]+)(?P=q)\s*"""
    r"""(?:,\s*(?P<dq>['"])(?P<default>(?:(?!(?P=dq))[^\\]|\\.)*)(?P=dq)\s*)?\)\s*\}\}"""
)
# Upstream Rocky's marker: ``@var(name)``, ``@var(name, default)``; name and default may be quoted or bare
# (a bare default runs to the closing parenthesis, so ``@var(day, 2024-01-01)`` defaults to 2024-01-01).
_AT_VAR = re.compile(
    r"""@var\(\s*(?:(?P<q>['"])(?P<qname>[A-Za-z0-9_]+)(?P=q)|(?P<name>[A-Za-z_][A-Za-z0-9_]*))\s*"""
    r"""(?:,\s*(?:(?P<dq>['"])(?P<qdefault>(?:(?!(?P=dq))[^\\]|\\.)*)(?P=dq)|(?P<default>[^)'"]*?))\s*)?\)"""
)
# Any other template call left after rendering (dbt's ``{{ ref('x') }}``, ``{{ config(...) }}``).
_TEMPLATE_CALL = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\(.*?\}\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class TableRef:
    """A bare table name at ``[start, end)`` of the SQL text (``name`` unquoted)."""

    name: str
    start: int
    end: int


@dataclass(slots=True)
class _Group:
    """One parenthesised level of the statement (the outermost level is the statement itself)."""

    query: bool | None  # None until the first token inside decides
    before: tuple[str, str | None]  # the significant token just before "("
    in_from: bool = False  # inside the comma list that follows FROM at this level


_NONE: tuple[str, str | None] = ("", None)


def find_table_refs(sql: str, dotted: list[tuple[str, ...]] | None = None) -> list[TableRef]:
    """Bare identifiers (plain or double-quoted) in table position, in order of appearance.

    Table position is right after FROM / JOIN, or an item of the comma list that follows FROM, at a
    level that is a query (not a function call's ``FROM``). Dotted names, table functions (``name(``)
    and CTE names are excluded.

    ``dotted``, when given, receives the dotted names in table position (``schema.table``,
    ``catalog.schema.table``, parts unquoted): the tables a model reads that are not models, found in the
    same scan so ``rocky dag`` pays nothing extra for them.
    """
    refs: list[TableRef] = []
    chain: list[str] | None = None  # the parts of a dotted name in table position, while it goes on
    chain_wants_part = False  # the chain just saw "." and waits for its next part
    cte_names: set[str] = set()
    # The last significant tokens as (keyword form, identifier name or None), newest last.
    hist: list[tuple[str, str | None]] = [_NONE, _NONE, _NONE, _NONE]
    groups = [_Group(query=True, before=_NONE)]
    closed_before = _NONE  # the token before the "(" of the group that closed last
    pending: TableRef | None = None  # identifier waiting to see whether "." or "(" follows
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            continue
        text = m.group()
        if pending is not None:
            if text == "." and dotted is not None:
                chain, chain_wants_part = [pending.name], True
            elif text not in (".", "("):
                refs.append(pending)
            pending = None
        elif chain is not None:
            if chain_wants_part and kind in ("ident", "qident"):
                chain.append(text if kind == "ident" else text[1:-1].replace('""', '"'))
                chain_wants_part = False
            elif not chain_wants_part and text == ".":
                chain_wants_part = True
            else:
                if not chain_wants_part and text != "(" and dotted is not None:
                    dotted.append(tuple(chain))
                chain = None
        group = groups[-1]
        name: str | None = None
        if kind == "ident":
            low = text.lower()
            name = low
        elif kind == "qident":
            low = text  # keeps the quotes: a quoted "from" is a name, never the keyword
            name = text[1:-1].replace('""', '"').lower()
        else:
            low = text
        if group.query is None:
            group.query = low in _QUERY_START
        prev = hist[-1][0]
        if name is not None:
            if kind == "ident" and low == "from" and group.query:
                group.in_from = True
            elif kind == "ident" and low in _FROM_LIST_END:
                group.in_from = False
            table_position = group.query and (
                prev in _TABLE_INTRO or (prev == "," and group.in_from)
            )
            if table_position and low not in _NOT_TABLES:
                ref_name = text if kind == "ident" else text[1:-1].replace('""', '"')
                pending = TableRef(ref_name, m.start(), m.end())
        elif text == "(":
            cte = _cte_name(hist, closed_before)
            if cte is not None:
                cte_names.add(cte)
            groups.append(_Group(query=None, before=hist[-1]))
        elif text == ")" and len(groups) > 1:
            closed_before = groups.pop().before
        hist.append((low, name))
        del hist[0]
    if pending is not None:
        refs.append(pending)
    if chain is not None and not chain_wants_part and dotted is not None:
        dotted.append(tuple(chain))
    if cte_names:
        refs = [r for r in refs if r.name.lower() not in cte_names]
    return refs


def _cte_name(hist: list[tuple[str, str | None]], closed_before: tuple[str, str | None]) -> str | None:
    """The CTE name when "(" opens a CTE body: ``name AS (``, ``name(cols) AS (``,
    ``name AS [NOT] MATERIALIZED (``."""
    lows = [h[0] for h in hist]
    if lows[-1] == "as":
        cand = hist[-2]
    elif lows[-1] == "materialized" and lows[-2] == "as":
        cand = hist[-3]
    elif lows[-1] == "materialized" and lows[-2] == "not" and lows[-3] == "as":
        cand = hist[-4]
    else:
        return None
    if cand[0] == ")":
        cand = closed_before
    return cand[1]


def render_vars(sql: str, variables: Mapping[str, str], *, model: str) -> str:
    """Replace ``{{ var('name') }}`` / ``{{ var('name', 'default') }}`` and upstream's ``@var(name)`` /
    ``@var(name, default)`` with ``--var`` values (the same lookup and the same error for both forms).

    Raises:
        ModelError: a variable without a default was not given with ``--var``, or the SQL uses another
            template call (``{{ ref('x') }}``) that would otherwise reach the warehouse as a syntax error.
    """
    if "@var(" in sql:
        sql = _AT_VAR.sub(lambda m: _value(
            m.group("qname") or m.group("name"),
            m.group("qdefault") if m.group("dq") else m.group("default"),
            variables, model, f"@var({m.group('qname') or m.group('name')}, <default>)",
        ), sql)
    if "{{" not in sql:
        return sql

    def replace(m: re.Match[str]) -> str:
        name = m.group("name")
        return _value(name, m.group("default"), variables, model, f"{{{{ var('{name}', '<default>') }}}}")

    rendered = _VAR.sub(replace, sql)
    other = _TEMPLATE_CALL.search(rendered)
    if other is not None:
        raise ModelError(
            f"model '{model}' uses the template expression {other.group()}, which rocky does not render",
            hint="only {{ var('name') }} is rendered; reference other models by their bare table name",
        )
    return rendered


def _value(
    name: str, default: str | None, variables: Mapping[str, str], model: str, with_default: str
) -> str:
    """The ``--var`` value of ``name``, else the marker's default; no value at all is an error
    (``with_default``: the marker's own form with a default, for the hint)."""
    if name in variables:
        return variables[name]
    if default is not None:
        return default
    raise ModelError(
        f"model '{model}' uses variable '{name}' but no value was given",
        hint=f"pass --var {name}=<value> or write {with_default}",
    )


def strip_trailing_semicolon(sql: str) -> str:
    """The statement without trailing semicolons, whitespace and comments.

    Compiled SQL is wrapped (``INSERT ... SELECT * FROM (<sql>)``, ``"eph" AS (<sql>)``): a trailing
    ``-- comment`` or ``;`` left in place would swallow or break the closing parenthesis.
    """
    body = sql.strip()
    last_line = body[body.rfind("\n") + 1 :]
    if not body.endswith((";", "*/")) and "--" not in last_line:
        return body  # the common case, without tokenizing: nothing to strip but whitespace
    end = 0
    for m in _TOKEN.finditer(sql):
        if m.lastgroup not in ("ws", "comment") and m.group() != ";":
            end = m.end()
    return sql[:end].strip()
