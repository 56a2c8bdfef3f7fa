"""The name ``DISCOVERY_IMPLEMENTATIONS`` registers for ``fivetran``; the adapter lives in ``fivetran.py``."""

from __future__ import annotations

from rocky_engine.adapters.fivetran import FivetranDiscovery

__all__ = ["FivetranDiscovery"]
