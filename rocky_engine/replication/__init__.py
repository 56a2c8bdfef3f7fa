"""Replication: schema-pattern parsing and routing, ``--filter``, drift rules and the copy statements.

The run orchestration lives in ``rocky_engine.run.replication``; ``rocky discover`` in
``rocky_engine.replication.discover``. Modules here import no warehouse driver at top level.
"""

from __future__ import annotations
