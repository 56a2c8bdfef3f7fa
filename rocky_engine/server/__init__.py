"""``rocky serve``: the HTTP API, the resident scheduler, signed webhook ingress and the graceful drain.

CONTRACT section 7 gives the routes and codes; ``docs/server.md`` is the guide. Entry point:
:func:`rocky_engine.server.serve_process.serve` (the CLI's ``serve`` command). For tests and embedding,
``context.build_context`` + ``app.create_app`` give the Starlette app without starting a process.
Nothing is imported here eagerly: starlette and uvicorn load only when a server is built.
"""

from __future__ import annotations
