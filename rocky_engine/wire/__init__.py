"""The wire format: pydantic models of every JSON document ``rocky`` prints and every file or stream
another process reads.

One module per document family; import a model from its module (importing this package loads nothing
but this docstring, so ``rocky --help`` and a quiet ``rocky tick`` pay only for what they print):

- ``base``: ``WireModel`` (omission rules, published aliases), ``document_text``;
- ``run``: ``rocky run`` (``RunResult`` ...); ``checks``: check results, one model per kind;
  ``metadata``: what a materialization and a check tell Dagster (one builder for both sides);
- ``dag``: ``rocky dag`` (``DagResult``, a superset of the published ``DagOutput``); ``events``: the
  ``rocky.events`` lines a run streams on stderr (``RunEvent``);
- ``discover``, ``history``, ``state`` (watermarks, pause/resume), ``spool`` (demand files and their
  listing), ``tick``, ``schedule`` (``GET /api/v1/schedule``, the tick heartbeat, the running-child
  registry), ``doctor``, ``validate``, ``load``,
  ``brief``, ``hooks`` (event context on stdin, ``hooks list|test``), ``ci``;
- ``jobs`` and ``server`` (the HTTP routes' documents), ``incident`` (incident bundles), ``connector``
  (the child connector request and result).

The engine's command results subclass these models and add only their exit code and rendering;
``dagster_rocky`` parses with them. This package imports pydantic and the standard library only.
"""

from __future__ import annotations

__all__: list[str] = []
