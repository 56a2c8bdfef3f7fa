"""Models from ``rocky dag`` through real Dagster and the real engine: a 200-model generated project.

The events of a run reach Dagster while the run goes on: Dagster's own event-log timestamps of the
materializations are compared with the moment the engine's run ended (its history record).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from dagster_rocky import RockyResource, build_rocky_model_assets

N_MODELS = 200
ROOTS = 20


def generate(root: Path, n: int = N_MODELS) -> Path:
    """A DuckDB project of ``n`` models in ``ROOTS`` chains (``m_020`` reads ``m_000`` ...)."""
    root.mkdir(parents=True)
    (root / "rocky.toml").write_text(
        '[adapter]\ntype = "duckdb"\npath = "warehouse.duckdb"\n\n'
        '[pipeline.models]\ntype = "transformation"\nmodels = "models/**"\n\n'
        "[pipeline.models.execution]\nconcurrency = 4\n"
    )
    models = root / "models" / "gen"
    models.mkdir(parents=True)
    (models / "_defaults.toml").write_text('[target]\nschema = "gen"\n')
    for i in range(n):
        body = (
            "select range as id from range(100)"
            if i < ROOTS
            else f"select id + 1 as id from m_{i - ROOTS:03d}"
        )
        (models / f"m_{i:03d}.sql").write_text(body + "\n")
    return root / "rocky.toml"


@pytest.mark.slow
def test_200_models_stream_their_materializations_before_the_run_ends(tmp_path: Path) -> None:
    rocky = RockyResource(config_path=str(generate(tmp_path / "gen")))
    (assets,) = build_rocky_model_assets(rocky)
    assert len(assets.keys) == N_MODELS
    deep = dg.AssetKey(["warehouse", "gen", f"m_{N_MODELS - 1:03d}"])
    assert [d.asset_key for d in assets.specs_by_key[deep].deps] == [
        dg.AssetKey(["warehouse", "gen", f"m_{N_MODELS - 1 - ROOTS:03d}"])
    ]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([assets], resources={"rocky": rocky}, instance=instance)
    assert result.success
    records = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    assert len(records) == N_MODELS
    (run,) = rocky.history().runs  # one engine process for the whole pipeline
    ended = datetime.fromisoformat(run.started_at.replace("Z", "+00:00")).timestamp() + run.duration_ms / 1000
    stamps = sorted(r.timestamp for r in records)
    assert stamps[0] < ended, (stamps[0], ended)
    # Dagster records events slower than this engine builds tiny models, so not all can be early; the
    # first ones must be (a reader that waited for the process would record none before it ended)
    early = [t for t in stamps if t < ended]
    assert len(early) >= 2, f"only {len(early)} of {N_MODELS} arrived before the run ended"
    meta = records[0].asset_materialization.metadata  # type: ignore[union-attr]
    assert meta["dagster/row_count"].value == 100  # rows in the model's table after the run
