"""A streamed materialization carries the same metadata as one read from the run document.

The same selection (a replicated table and a model of the playground) is materialized twice through the
production multi-assets and the real engine, behind a wrapper that takes one source away: once the
wrapper empties the run document's ``materializations`` (so each materialization is built from its
``rocky.events`` line), once it drops the event lines (so each comes from the document, what an engine
without events gives). Both must show the same metadata keys, watermark and column count included.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_rocky import RockyResource, build_rocky_assets, build_rocky_model_assets
from dagster_rocky.types import EVENTS_TARGET

CHECKS = "\n[pipeline.raw.checks]\nrow_count = true\n"
ORDERS = dg.AssetKey(["duckdb", "orders", "orders"])
STG_ORDERS = dg.AssetKey(["playground", "staging", "stg_orders"])


def wrapper(tmp_path: Path, rocky_bin: str, keep: str) -> str:
    """A ``rocky`` that runs the real one keeping only one source of materializations: ``keep="events"``
    empties the document's ``materializations``, ``keep="document"`` drops the ``rocky.events`` lines."""
    script = tmp_path / f"rocky-{keep}"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
        import json, subprocess, sys
        done = subprocess.run([{rocky_bin!r}, *sys.argv[1:]], capture_output=True, text=True)
        stderr, stdout = done.stderr, done.stdout
        if {keep!r} == "events" and "run" in sys.argv:
            doc = json.loads(stdout)
            assert doc["materializations"], "the document had materializations"
            stdout = json.dumps({{**doc, "materializations": []}})
        if {keep!r} == "document":
            stderr = "".join(line for line in stderr.splitlines(keepends=True)
                             if {EVENTS_TARGET!r} not in line)
        sys.stderr.write(stderr)
        sys.stdout.write(stdout)
        sys.exit(done.returncode)
    """))
    script.chmod(0o755)
    return str(script)


def materialize(config: Path, binary: str) -> dict[dg.AssetKey, dict[str, Any]]:
    """Materialization metadata by key (raw values)."""
    rocky = RockyResource(config_path=str(config), binary_path=binary)
    assets = [*build_rocky_assets(rocky, pipeline="raw"), *build_rocky_model_assets(rocky)]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(assets, selection=[ORDERS, STG_ORDERS], resources={"rocky": rocky},
                            instance=instance)
    assert result.success
    mats = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        mats[mat.asset_key] = {k: v.value for k, v in mat.metadata.items()}
    return mats


def test_streamed_and_document_materializations_have_the_same_metadata(
    playground: Path, tmp_path: Path, rocky_bin: str
) -> None:
    config = playground / "rocky.toml"
    config.write_text(config.read_text() + CHECKS)
    twin = tmp_path / "twin"
    shutil.copytree(playground, twin)  # the same seeded project, for the run without events

    streamed = materialize(config, wrapper(tmp_path, rocky_bin, keep="events"))
    from_document = materialize(twin / "rocky.toml", wrapper(tmp_path, rocky_bin, keep="document"))

    assert set(streamed) == set(from_document) == {ORDERS, STG_ORDERS}
    # the same keys, with one exception: the model's row count after the run. The engine counts it for
    # the event (someone listens); the document knows a row count only from a row_count check, which the
    # table has and the model has not
    assert sorted(streamed[ORDERS]) == sorted(from_document[ORDERS])
    assert sorted(streamed[STG_ORDERS]) == sorted([*from_document[STG_ORDERS], "dagster/row_count"])
    table, model = streamed[ORDERS], streamed[STG_ORDERS]
    # what only the document had before: the watermark and the column count
    assert table["watermark"] == from_document[ORDERS]["watermark"] != None  # noqa: E711
    assert table["column_count"] == from_document[ORDERS]["column_count"] > 0
    assert model["watermark"] == from_document[STG_ORDERS]["watermark"] != None  # noqa: E711
    assert table["dagster/row_count"] == from_document[ORDERS]["dagster/row_count"] == 20000
    assert model["dagster/row_count"] > 0
    assert model["sql_hash"] == from_document[STG_ORDERS]["sql_hash"]
    assert model["strategy"] == from_document[STG_ORDERS]["strategy"] == "incremental"
    assert table["rocky/pipeline"] == "raw" and model["rocky/pipeline"] == "models"
    assert table["rocky/finished_at"] > 0 and from_document[ORDERS]["rocky/finished_at"] > 0
