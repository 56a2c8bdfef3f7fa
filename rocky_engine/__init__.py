"""Rocky: a data-pipeline engine with its own CLI, scheduler and state store.

The engine never imports Dagster; the integration (``dagster_rocky``) talks to it through the CLI.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
