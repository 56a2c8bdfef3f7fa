"""A streamed materialization (and check result) carries the same metadata as one read from the run document.

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
#: every kind of replication check, and a custom one that fails (its query and value are details too)
ALL_CHECKS = """
[pipeline.raw.checks]
row_count = true
column_match = true
freshness = { threshold_seconds = 60 }
fail_on_error = false

[[pipeline.raw.checks.custom]]
name = "no_rows"
sql = "SELECT count(*) FROM {target}"
"""
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


def checks_of(config: Path, binary: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Check results of the orders tables by (asset, check): passed, severity and metadata (raw values)."""
    rocky = RockyResource(config_path=str(config), binary_path=binary)
    result = dg.materialize(
        build_rocky_assets(rocky, pipeline="raw", pool=None), selection=[ORDERS], resources={"rocky": rocky}
    )
    assert result.success
    return {
        (c.asset_key.to_user_string(), c.check_name): {
            "passed": c.passed,
            "dagster_severity": c.severity,
            **{k: v.value for k, v in c.metadata.items()},
        }
        for c in result.get_asset_check_evaluations()
    }


def test_streamed_and_document_check_results_have_the_same_metadata(
    playground: Path, tmp_path: Path, rocky_bin: str
) -> None:
    config = playground / "rocky.toml"
    config.write_text(config.read_text() + ALL_CHECKS)
    twin = tmp_path / "twin"
    shutil.copytree(playground, twin)
    third = tmp_path / "third"
    shutil.copytree(playground, third)  # for the run under Dagster Pipes

    streamed = checks_of(config, wrapper(tmp_path, rocky_bin, keep="events"))
    from_document = checks_of(twin / "rocky.toml", wrapper(tmp_path, rocky_bin, keep="document"))

    assert set(streamed) == set(from_document)
    assert {name for _, name in streamed} == {"row_count", "column_match", "freshness", "no_rows"}
    for key, check in streamed.items():
        document = from_document[key]
        assert sorted(check) == sorted(document), key
        # what the event used to lose: the engine's names for what it measured
        assert {k: v for k, v in check.items() if k != "lag_seconds"} == {
            k: v for k, v in document.items() if k != "lag_seconds"
        }, key
    # and under Dagster Pipes (the engine's own reporter): the same again, plus the invocation's run id
    # and status that Dagster adds to every result of a Pipes invocation
    piped = _without_lag(checks_under_pipes(third / "rocky.toml", [n for _, n in streamed]))
    invocation = {"rocky/run_id", "rocky/status"}
    assert {key: {k: v for k, v in c.items() if k not in invocation} for key, c in piped.items()} == (
        _without_lag(streamed)
    )
    orders = streamed[("duckdb/orders/orders", "row_count")]
    assert orders["source_count"] == orders["target_count"] == 20000
    assert "lag_seconds" in streamed[("duckdb/orders/orders", "freshness")]


def checks_under_pipes(config: Path, names: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """The same check results as ``checks_of``, from a user's asset that runs the engine under Pipes."""
    rocky = RockyResource(config_path=str(config))

    @dg.multi_asset(
        specs=[dg.AssetSpec(ORDERS, skippable=True)],
        check_specs=[dg.AssetCheckSpec(name, asset=ORDERS) for name in names],
    )
    def orders(context, rocky: RockyResource):  # type: ignore[no-untyped-def]
        yield from rocky.run_pipes(context, "table=orders", pipeline="raw").get_results()

    result = dg.materialize([orders], resources={"rocky": rocky})
    assert result.success
    return {
        (c.asset_key.to_user_string(), c.check_name): {
            "passed": c.passed,
            "dagster_severity": c.severity,
            **{k: v.value for k, v in c.metadata.items()},
        }
        for c in result.get_asset_check_evaluations()
    }


def _without_lag(checks: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The check results without the freshness lag (it grows between two runs)."""
    return {key: {k: v for k, v in check.items() if k != "lag_seconds"} for key, check in checks.items()}
