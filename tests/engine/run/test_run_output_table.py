"""The people-facing table of a run: quality runs list every check, other runs only the failures."""

from __future__ import annotations

from rocky_engine.run.output import RunOutput
from rocky_engine.wire.checks import TableCheckResult


def _checks() -> list[TableCheckResult]:
    return [
        TableCheckResult(
            asset_key=["wh", "marts", "orders"],
            checks=[
                {"name": "not_null_id", "passed": True, "severity": "error"},
                {"name": "unique_id", "passed": False, "severity": "warning"},
            ],
        )
    ]


def test_quality_run_lists_every_check() -> None:
    text = RunOutput(pipeline_type="quality", check_results=_checks()).render_table()
    lines = text.splitlines()
    assert "checks" in lines
    assert any(line.split() == ["wh.marts.orders", "not_null_id", "passed", "error"] for line in lines)
    assert any(line.split() == ["wh.marts.orders", "unique_id", "FAILED", "warning"] for line in lines)


def test_other_runs_list_only_failed_checks() -> None:
    text = RunOutput(pipeline_type="replication", check_results=_checks()).render_table()
    lines = text.splitlines()
    assert "failed checks" in lines
    assert not any("not_null_id" in line for line in lines)
    assert any(line.split() == ["wh.marts.orders", "unique_id", "FAILED", "warning"] for line in lines)
