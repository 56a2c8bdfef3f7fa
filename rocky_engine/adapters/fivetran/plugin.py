"""The ``fivetran`` adapter type: discovery only (``[source.discovery] adapter``), never a warehouse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocky_engine.adapters.plugin import AdapterPlugin, Health
from rocky_engine.config.adapters import FivetranAdapterConfig

if TYPE_CHECKING:
    from rocky_engine.adapters.discovery import DiscoveryAdapter
    from rocky_engine.config import RockyConfig

_AUTH_TIMEOUT_S = 10.0


class FivetranPlugin(AdapterPlugin):
    type = "fivetran"
    warehouse = False

    def reachable(self, config: RockyConfig, name: str) -> Health:
        return "healthy", f"{name}: fivetran discovery adapter (credentials: see auth)"

    def authenticated(self, config: RockyConfig, name: str) -> Health | None:
        """One authenticated ``GET /v1/destinations/<id>``; the key and secret never reach a message."""
        import httpx

        cfg = config.adapter(name)
        assert isinstance(cfg, FivetranAdapterConfig), f"adapter {name} is not a fivetran adapter"
        url = f"{cfg.base_url.rstrip('/')}/v1/destinations/{cfg.destination_id}"
        auth = (cfg.api_key.get_secret_value(), cfg.api_secret.get_secret_value())
        try:
            response = httpx.get(url, auth=auth, timeout=_AUTH_TIMEOUT_S,
                                 headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            return "critical", f"{name}: Fivetran API unreachable ({type(exc).__name__})"
        if response.status_code in (401, 403):
            return "critical", f"{name}: Fivetran rejected the API key/secret (HTTP {response.status_code})"
        if response.status_code == 404:
            return "critical", f"{name}: Fivetran destination '{cfg.destination_id}' not found (HTTP 404)"
        if response.status_code >= 400:
            return "critical", f"{name}: Fivetran API answered HTTP {response.status_code}"
        return "healthy", f"{name}: Fivetran credentials accepted"

    def discovery(self, config: RockyConfig, name: str) -> DiscoveryAdapter:
        from rocky_engine.adapters.fivetran.discovery import FivetranDiscovery

        return FivetranDiscovery(config, name)


PLUGIN = FivetranPlugin()
