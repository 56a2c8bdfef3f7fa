"""V021: `rocky validate` refuses a merge that asks to be atomic on an adapter whose declared capability level
has no MERGE (Spark without `table_format`, or `table_format = "parquet"`); and the `atomic` keys' own rules.

No server is involved: validate never connects, so the level is the one the config declares.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.ops.validate import ValidateOutput, run_validation

SPARK = '[adapter.spark]\ntype = "spark"\nremote = "sc://localhost:1"\n'
ADAPTERS = {
    "spark": SPARK,
    "parquet": SPARK + 'table_format = "parquet"\n',
    "delta": SPARK + 'table_format = "delta"\n',
    "duckdb": '[adapter.spark]\ntype = "duckdb"\npath = "wh.duckdb"\n',
    "postgres": '[adapter.spark]\ntype = "postgres"\ndsn = "postgresql://u:secret@localhost/wh"\n',
}
MERGE = '[strategy]\ntype = "merge"\nunique_key = ["id"]\n'
REFUSAL_TAIL = (
    "has no MERGE at the capability level it declares ({level}): the merge would rewrite the whole table "
    "through a stage and two renames; declare table_format = \"delta\" under [adapter.spark] if the "
    "server's tables are Delta, or remove the atomic request and accept the rewrite, or use another "
    "strategy (delete_insert, full_refresh)"
)
UNDECLARED = "parquet: table_format is not declared, so Parquet is assumed"


def project(tmp_path: Path, adapter: str, *, pipeline: str = "", sidecars: dict[str, str] | None = None
            ) -> ValidateOutput:
    """A transformation pipeline `models` on `[adapter.spark]` (of the ADAPTERS kind) with models `m`
    (merge unless its sidecar says otherwise) and `f` (full refresh); validated."""
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "rocky.toml").write_text(
        ADAPTERS[adapter] + '\n[pipeline.models]\ntype = "transformation"\nmodels = "models/**"\n'
        + pipeline + '[pipeline.models.target]\nadapter = "spark"\n'
    )
    for name in ("m", "f"):
        (tmp_path / "models" / f"{name}.sql").write_text("SELECT 1 AS id\n")
    for name, sidecar in {"m": MERGE, **(sidecars or {})}.items():
        (tmp_path / "models" / f"{name}.toml").write_text(sidecar)
    return run_validation(tmp_path / "rocky.toml", env={})


def v021(out: ValidateOutput) -> list[tuple[str | None, str]]:
    return [(m.field, m.message) for m in out.messages if m.code == "V021"]


def test_a_pipeline_request_on_undeclared_spark_is_refused(tmp_path: Path) -> None:
    out = project(tmp_path, "spark", pipeline="atomic_merges = true\n")
    assert v021(out) == [(
        "pipeline.models.atomic_merges",
        "model 'm' of pipeline 'models' asks for an atomic merge (atomic_merges = true under "
        "[pipeline.models]), but adapter 'spark' " + REFUSAL_TAIL.format(level=UNDECLARED),
    )]
    [message] = out.messages
    assert message.severity == "error"
    assert not out.valid and out.exit_code() == 1
    assert [(p.name, p.ok) for p in out.pipelines] == [("models", False)]


def test_a_model_request_on_declared_parquet_is_refused(tmp_path: Path) -> None:
    out = project(tmp_path, "parquet", sidecars={"m": MERGE + "atomic = true\n"})
    assert v021(out) == [(
        "pipeline.models.models",
        "model 'm' of pipeline 'models' asks for an atomic merge ([strategy] atomic = true), but adapter "
        "'spark' " + REFUSAL_TAIL.format(level="parquet"),
    )]
    assert not out.valid


def test_delta_declared_has_merge(tmp_path: Path) -> None:
    out = project(tmp_path, "delta", pipeline="atomic_merges = true\n",
                  sidecars={"f": MERGE + "atomic = true\n"})
    assert out.valid and out.messages == []


def test_without_a_request_a_rewrite_is_accepted(tmp_path: Path) -> None:
    assert project(tmp_path, "spark").messages == []


def test_a_model_can_accept_the_rewrite_its_pipeline_refuses(tmp_path: Path) -> None:
    # the model's own `atomic = false` wins over the pipeline's atomic_merges; f is no merge: not asked
    out = project(tmp_path, "spark", pipeline="atomic_merges = true\n",
                  sidecars={"m": MERGE + "atomic = false\n"})
    assert out.valid and out.messages == []


@pytest.mark.parametrize("adapter", ["duckdb", "postgres"])
def test_duckdb_and_postgres_have_merge(tmp_path: Path, adapter: str) -> None:
    out = project(tmp_path, adapter, pipeline="atomic_merges = true\n",
                  sidecars={"m": MERGE + "atomic = true\n"})
    assert out.valid and out.messages == []


def test_atomic_on_a_strategy_other_than_merge_is_refused(tmp_path: Path) -> None:
    out = project(tmp_path, "delta", sidecars={"f": '[strategy]\ntype = "full_refresh"\natomic = true\n'})
    [message] = out.messages
    assert (message.code, message.field) == ("V013", "pipeline.models.models")
    assert message.message == (
        f"{tmp_path / 'models' / 'f.toml'}: strategy.atomic: atomic applies to strategy 'merge' only (this "
        "strategy is 'full_refresh'); remove atomic, or set type = \"merge\" with a unique_key"
    )


def test_atomic_must_be_a_boolean(tmp_path: Path) -> None:
    out = project(tmp_path, "delta", sidecars={"m": MERGE + 'atomic = "yes"\n'})
    [message] = out.messages
    assert message.code == "V013"
    assert message.message.endswith("strategy.atomic: atomic must be true or false")


REPLICATION = """
[adapter.src]
type = "duckdb"
path = "src.duckdb"

[pipeline.raw]
strategy = "{strategy}"
{extra}
[pipeline.raw.source]
adapter = "src"
schema_pattern = {{ prefix = "src__", components = ["tenant"] }}
[pipeline.raw.target]
adapter = "spark"
catalog_template = "spark_catalog"
schema_template = "stg__{{tenant}}"
"""


def replication(tmp_path: Path, adapter: str, strategy: str = "merge", extra: str = "atomic_merges = true"
                ) -> ValidateOutput:
    extra += '\nmerge_keys = ["id"]' if strategy == "merge" else ""
    text = ADAPTERS[adapter] + REPLICATION.format(strategy=strategy, extra=extra)
    (tmp_path / "rocky.toml").write_text(text)
    return run_validation(tmp_path / "rocky.toml", env={})


def test_a_replication_request_on_undeclared_spark_is_refused(tmp_path: Path) -> None:
    out = replication(tmp_path, "spark")
    assert v021(out) == [(
        "pipeline.raw.atomic_merges",
        "replication pipeline 'raw' asks for an atomic merge (atomic_merges = true), but adapter 'spark' "
        + REFUSAL_TAIL.format(level=UNDECLARED),
    )]


@pytest.mark.parametrize("adapter", ["delta", "duckdb", "postgres"])
def test_a_replication_request_on_a_target_with_merge_is_accepted(tmp_path: Path, adapter: str) -> None:
    assert replication(tmp_path, adapter).messages == []


def test_a_replication_merge_without_the_request_is_accepted(tmp_path: Path) -> None:
    assert replication(tmp_path, "spark", extra="").messages == []


def test_atomic_merges_on_a_replication_that_does_not_merge_is_refused(tmp_path: Path) -> None:
    [message] = replication(tmp_path, "delta", strategy="incremental").messages
    assert message.code == "V001"
    assert "atomic_merges = true applies to strategy 'merge' only (this pipeline's strategy is " \
        "'incremental'); remove it, or set strategy = \"merge\"" in message.message
