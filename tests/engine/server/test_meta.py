"""``GET /api/v1/meta``: engine version, live optional routes, capabilities (issue 15 part B).

The shape follows upstream Rocky's ``MetaOutput`` (rocky_sdk ``types_generated/meta_schema.py``): required
``engine_version``, ``capabilities``, ``routes``, ``schemas_hash``, ``state_schema_version``; optional
``config_hash`` and ``token_scope``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine import __version__
from rocky_engine.state.schema import SCHEMA_VERSION
from tests.engine.server.kit import SECRET, InProcessServer, simple_project

WEBHOOK = "/api/v1/hooks/trigger/{pipeline}"
TOKEN = "tok-meta"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return simple_project(tmp_path)


def test_meta_without_scheduler_lists_no_webhook_ingress(config: Path) -> None:
    with InProcessServer(config) as srv, srv.client() as c:
        doc = c.get("/api/v1/meta").json()
        hook = c.post("/api/v1/hooks/trigger/orders", content=b"{}")
    assert hook.status_code == 404  # what meta says: the route is not live
    assert doc["engine_version"] == doc["version"] == __version__
    assert doc["state_schema_version"] == SCHEMA_VERSION
    assert WEBHOOK not in doc["routes"] and "webhook_ingress" not in doc["capabilities"]
    assert {"/api/v1/health", "/api/v1/meta", "/api/v1/jobs/run"} <= set(doc["routes"])
    assert "/metrics" not in doc["routes"]  # /api/v1 routes only
    assert len(doc["schemas_hash"]) == 64 and len(doc["config_hash"]) == 64
    assert "token_scope" not in doc
    _validates_against_the_published_model(doc)


def _validates_against_the_published_model(doc: dict[str, object]) -> None:
    """The published client's model of this document (rocky-sdk, a [dev] client once installed)."""
    try:
        from rocky_sdk.types_generated.meta_schema import MetaOutput
    except ImportError:
        return
    parsed = MetaOutput.model_validate(doc)
    assert parsed.engine_version == __version__


def test_meta_under_scheduler_lists_webhook_ingress(config: Path) -> None:
    with InProcessServer(config, token=TOKEN, scheduler=True, webhook_secrets=(SECRET,),
                         poll_interval_seconds=3600) as srv:
        with srv.client() as c:
            assert c.get("/api/v1/meta").status_code == 401  # behind the token like every other route
        with srv.client(headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            doc = c.get("/api/v1/meta").json()
    assert WEBHOOK in doc["routes"]
    assert {"scheduler", "webhook_ingress", "webhook_signatures"} <= set(doc["capabilities"])
    assert doc["token_scope"] == "full"
    assert TOKEN not in str(doc) and SECRET not in str(doc)
    _validates_against_the_published_model(doc)
