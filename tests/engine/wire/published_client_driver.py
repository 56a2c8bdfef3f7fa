"""Drives the published ``dagster-rocky`` ``RockyResource`` against the playground in the current directory
and prints what each call returned, as one JSON object (run by test_published_client.py with the published
client venv's python; no import of our packages: this file is the client's user).

Argument: ``ci`` to call ``ci()`` too (our CLI takes ``--models`` once the config forms have it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from dagster_rocky import RockyResource


def main() -> int:
    import importlib.metadata

    import dagster_rocky

    rocky = RockyResource(config_path="rocky.toml", state_path="state.db", models_dir="models")
    # which client this is: the published one, not the dagster_rocky of the repository
    seen: dict[str, Any] = {
        "client": [dagster_rocky.__file__, importlib.metadata.version("dagster-rocky"),
                   importlib.metadata.version("rocky-sdk")],
    }

    discovered = rocky.discover()
    seen["discover"] = sorted((s.id, sorted(t.name for t in s.tables)) for s in discovered.sources)

    first = rocky.run(filter="source=orders", pipeline="raw")
    seen["run"] = _run(first)

    # resume_run() sends no --pipeline: the engine resumes the replication pipeline's latest run, skipping
    # the orders tables it finished and copying the rest
    resumed = rocky.resume_run()
    seen["resume_run"] = _run(resumed)

    one = rocky.run_model("stg_customers", pipeline="models")
    seen["run_model"] = _run(one)

    history = rocky.history()
    seen["history"] = {
        "count": history.count,
        "runs": [{"run_id": r.run_id, "status": r.status, "models": [m.model_name for m in r.models]}
                 for r in history.runs],
    }
    executions = rocky.history(model="stg_customers")
    seen["history_model"] = {
        "count": executions.count,
        "executions": [{"status": e.status, "sql_hash": e.sql_hash, "rows": e.rows_affected}
                       for e in executions.executions],
    }

    state = rocky.state()
    seen["state"] = {w.table: w.last_value.isoformat() for w in state.watermarks}

    health = rocky.state_health()
    seen["state_health"] = {
        "last_run_status": health.last_run_status,
        "last_run_at": health.last_run_at.isoformat() if health.last_run_at else None,
        "backend": health.backend,
    }

    doctor = rocky.doctor()
    overall = doctor.overall.value if hasattr(doctor.overall, "value") else doctor.overall
    seen["doctor"] = {"overall": str(overall), "checks": [c.name for c in doctor.checks]}

    if "ci" in sys.argv[1:]:
        ci = rocky.ci()
        seen["ci"] = {"exit_code": ci.exit_code, "compile_ok": ci.compile_ok,
                      "models_compiled": ci.models_compiled, "failures": len(ci.failures)}

    print(json.dumps(seen))
    return 0


def _run(result: Any) -> dict[str, Any]:
    return {
        "status": str(result.status.value if hasattr(result.status, "value") else result.status),
        # the published RunResult has no run_id (history has it); resumed_from names the run resumed
        "resumed_from": result.resumed_from,
        "tables_copied": result.tables_copied,
        "tables_skipped": result.tables_skipped,
        "materialized": sorted(m.metadata.target_table_full_name for m in result.materializations),
        "rows": sum(m.rows_copied or 0 for m in result.materializations),
    }


if __name__ == "__main__":
    sys.exit(main())
