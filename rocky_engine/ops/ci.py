"""``rocky ci``: validate, compile, build every model with zero rows, run the assertions; no warehouse writes.

The build happens in a scratch in-memory DuckDB. Each model becomes ``CREATE TABLE rocky_ci.<schema>.
<table> AS SELECT * FROM (<compiled SQL>) LIMIT 0``: the binder checks every table, column and function the
model uses, and no row is read. References between models point at the scratch copies. Source tables
resolve against the real DuckDB warehouse when its file exists: it is ATTACHed ``READ_ONLY`` (DuckDB
refuses any write to it), so CI sees the real source schemas and cannot change them. Without that file (a
fresh checkout, a PostgreSQL warehouse) a model that reads a source cannot be built; it is syntax-checked
with DuckDB's parser instead and reported as an advisory warning, as are the models downstream of it.

Assertions of each transformation pipeline then run against the empty scratch tables: a row-level
assertion proves its SQL binds (a missing column is an error); a table-level one (``row_count_range``,
``aggregate``) needs data, so only its SQL is checked and it counts as skipped.

Outcome (``exit_code`` in the JSON): 1 when anything is an error (the process exits 1), 4 when
everything passed with advisory warnings, 0 otherwise (both exit 0; read the field to act on warnings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rocky_engine.errors import ModelError, RockyError, UsageError
from rocky_engine.output import Result, render_rows
from rocky_engine.wire.ci import CiDiagnostic, CiResult, CiSeverity, CiTestFailure

if TYPE_CHECKING:
    import duckdb

    from rocky_engine.adapters.base import TableName
    from rocky_engine.adapters.plugin import CiSource
    from rocky_engine.config import RockyConfig, TransformationPipeline
    from rocky_engine.models import ModelSet

SCRATCH = "rocky_ci"


class CiOutput(CiResult, Result):
    """``rocky ci``, rendered; the process exits 1 only for errors (4 stays in the document)."""

    def exit_code(self) -> int:
        # 4 lives only in the JSON: advisory warnings must not fail a CI step that checks $?.
        return 1 if self.ci_exit_code == 1 else 0

    def render_table(self) -> str:
        verdict = {0: "passed", 4: "passed with warnings", 1: "FAILED"}[self.ci_exit_code]
        head = (
            f"rocky ci: {verdict} (exit_code {self.ci_exit_code}): {self.models_compiled} compiled, "
            f"{self.models_built} built, tests {self.tests_passed} passed / {self.tests_failed} failed / "
            f"{self.tests_skipped} skipped\n"
        )
        if not self.diagnostics:
            return head
        rows = [[d.severity.lower(), d.code, d.pipeline or "", d.model, d.message] for d in self.diagnostics]
        return head + render_rows(None, ["severity", "code", "pipeline", "model", "message"], rows)


#: our severities (validate's included) as the published enum spells them
Severity = Literal["error", "warning", "info"]
_PUBLISHED: dict[str, CiSeverity] = {"error": "Error", "warning": "Warning", "info": "Info"}


@dataclass
class _Tally:
    diagnostics: list[CiDiagnostic] = field(default_factory=list)
    compiled: int = 0
    built: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    compile_errors: int = 0
    failures: list[CiTestFailure] = field(default_factory=list)

    def add(self, severity: Severity, code: str, message: str, pipeline: str | None = None,
            model: str | None = None) -> None:
        self.diagnostics.append(CiDiagnostic(severity=_PUBLISHED[severity], code=code, message=message,
                                             pipeline=pipeline, model=model or ""))

    def fail(self, test: str, error: str) -> None:
        """A test that failed (counted in ``tests_failed``, listed in ``failures``)."""
        self.failed += 1
        self.failures.append(CiTestFailure(name=test, error=error))



def run_ci(
    config_path: Path,
    *,
    pipeline: str | None = None,
    variables: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    now: datetime | None = None,
    models_dir: str | None = None,
) -> CiOutput:
    """Everything ``rocky ci`` does.

    Args:
        models_dir: ``--models DIR``: the transformation pipeline reads its models from there.

    Raises:
        UsageError: ``pipeline`` is not a transformation pipeline of the project; ``models_dir`` is not a
            directory or no single transformation pipeline takes it.
    """
    import os

    from rocky_engine.config.loader import load_config
    from rocky_engine.ops.validate import run_validation

    env = os.environ if environ is None else environ
    tally = _Tally()

    def point(config: RockyConfig) -> str | None:
        if models_dir is None:
            return pipeline
        from rocky_engine.models.models_flag import point_models_at

        return point_models_at(config, models_dir, pipeline)

    validation = run_validation(config_path, env=env, adjust=point)
    for m in validation.messages:
        tally.add(m.severity, m.code, m.message + (f" [{m.field}]" if m.field else ""))
    if not validation.valid:
        return _result(tally)
    config = load_config(config_path, env=env)
    names = _pipelines(config, point(config))
    for name in names:
        _check_pipeline(config, name, tally, dict(variables or {}), env, now or datetime.now(UTC))
    for name, p in config.pipelines.items():
        if p.type == "quality" and pipeline is None:
            tally.add("info", "C007", "quality pipelines check warehouse data; not run by rocky ci", name)
    return _result(tally)


def _pipelines(config: RockyConfig, requested: str | None) -> list[str]:
    names = [n for n, p in config.pipelines.items() if p.type == "transformation"]
    if requested is None:
        return names
    if requested not in names:
        raise UsageError(
            f"'{requested}' is not a transformation pipeline",
            hint=f"transformation pipelines: {', '.join(names) or '(none)'}",
        )
    return [requested]


def _result(tally: _Tally) -> CiOutput:
    errors = sum(d.severity == "Error" for d in tally.diagnostics)
    warnings = sum(d.severity == "Warning" for d in tally.diagnostics)
    code: Literal[0, 1, 4] = 1 if errors else 4 if warnings else 0
    return CiOutput(
        exit_code=code,
        compile_ok=tally.compile_errors == 0 and not any(d.code.startswith("V") and d.severity == "Error"
                                                         for d in tally.diagnostics),
        tests_ok=tally.failed == 0,
        models_compiled=tally.compiled,
        models_built=tally.built,
        tests_passed=tally.passed,
        tests_failed=tally.failed,
        tests_skipped=tally.skipped,
        diagnostics=tally.diagnostics,
        failures=tally.failures,
    )


# --- one pipeline ---------------------------------------------------------------------------------------


def _check_pipeline(
    config: RockyConfig, name: str, tally: _Tally, variables: dict[str, str], env: Mapping[str, str],
    now: datetime,
) -> None:
    from rocky_engine.models import load_models

    pipeline: TransformationPipeline = config.pipeline(name)  # type: ignore[assignment]
    try:
        model_set = load_models(pipeline.models, config.root, env)
    except RockyError as exc:
        tally.add("error", "C009", f"models cannot be loaded: {exc}", name)
        tally.compile_errors += 1
        return
    from rocky_engine.adapters.registry import plugin_of

    adapter_type = config.adapter(pipeline.target.adapter).type
    source = plugin_of(config, pipeline.target.adapter).ci_source(config, pipeline.target.adapter)
    targets = _scratch_targets(model_set, source.catalog)
    compiled = _compile_all(model_set, targets, variables, name, tally)
    scratch = _Scratch(name, adapter_type, source, tally)
    try:
        built = scratch.build_all(model_set, targets, compiled)
        _run_assertions(pipeline, model_set, targets, built, scratch, name, tally, now)
    finally:
        scratch.close()


def _scratch_targets(model_set: ModelSet, catalog: str) -> dict[str, TableName]:
    from rocky_engine.adapters.base import TableName, quote_ident

    targets: dict[str, TableName] = {}
    for name, model in model_set.models.items():
        schema = model.target.schema or "main"
        table = model.target.table or name
        qualified = ".".join(quote_ident(p) for p in (SCRATCH, schema, table))
        # catalog/schema/table keep the real names (assertions match on them); SQL points at the scratch.
        targets[name] = TableName(model.target.catalog or catalog, schema, table, qualified)
    return targets


def _compile_all(
    model_set: ModelSet, targets: dict[str, TableName], variables: dict[str, str], pipeline: str,
    tally: _Tally,
) -> dict[str, str]:
    from rocky_engine.adapters.base import quote_ident  # the scratch is DuckDB
    from rocky_engine.run.compile import compile_model

    compiled: dict[str, str] = {}
    for name in model_set.order:
        if model_set.models[name].strategy.type == "ephemeral":
            continue
        try:
            compiled[name] = compile_model(name, model_set, targets, variables, quote_ident)
        except ModelError as exc:
            tally.compile_errors += 1
            tally.add("error", "C002", f"does not compile: {exc}", pipeline, name)
            continue
        tally.compiled += 1
    return compiled


class _Scratch:
    """The in-memory DuckDB the models are built in, with the real warehouse attached read-only."""

    def __init__(self, pipeline: str, adapter_type: str, source: CiSource, tally: _Tally) -> None:
        import duckdb

        self.pipeline = pipeline
        self.tally = tally
        self.dialect_note = "" if source.exact else (
            f" (built with DuckDB; the warehouse is {adapter_type}, so dialect differences are advisory)"
        )
        self.strict = source.exact
        self.con: duckdb.DuckDBPyConnection = duckdb.connect(":memory:")
        self.con.execute(f"ATTACH ':memory:' AS {SCRATCH}")
        self.sources = False
        warehouse = source.attach
        if warehouse is not None and warehouse.exists():
            self._attach(warehouse, source.catalog)
        elif source.exact:
            where = "an in-memory warehouse" if warehouse is None else f"{warehouse} does not exist"
            tally.add("warning", "C008", f"source tables cannot be checked: {where}; models that read "
                      "sources are only syntax-checked", pipeline)
        else:
            tally.add("warning", "C008", f"source tables cannot be checked: the warehouse is {adapter_type}; "
                      "models that read sources are only syntax-checked", pipeline)

    def _attach(self, warehouse: Path, catalog: str) -> None:
        import duckdb

        from rocky_engine.adapters.base import quote_ident
        from rocky_engine.adapters.dialect import ANSI

        try:
            self.con.execute(f"ATTACH {ANSI.literal(str(warehouse))} AS {quote_ident(catalog)} (READ_ONLY)")
            self.con.execute(f"USE {quote_ident(catalog)}")
        except duckdb.Error as exc:
            locked = "lock" in str(exc).lower()
            reason = "it is locked by a running process" if locked else _first_line(exc)
            self.tally.add("warning", "C008", f"cannot attach {warehouse} read-only ({reason}); models that "
                           "read sources are only syntax-checked", self.pipeline)
            return
        self.sources = True

    def build_all(
        self, model_set: ModelSet, targets: dict[str, TableName], compiled: dict[str, str]
    ) -> set[str]:
        """Build every compiled model in DAG order; the names that were built."""
        import duckdb

        from rocky_engine.adapters.base import quote_ident

        built: set[str] = set()
        blocked: set[str] = set()
        schemas: set[str] = set()
        for name in model_set.order:
            if name not in compiled:
                if model_set.models[name].strategy.type != "ephemeral":
                    blocked.add(name)
                continue
            upstream = set(model_set.built_upstream(name))
            missing = sorted(d for d in upstream if d in blocked)
            if missing:
                blocked.add(name)
                self._parse_only(name, compiled[name])
                self.tally.add("warning", "C005", f"not built: upstream not built: {', '.join(missing)}",
                               self.pipeline, name)
                continue
            target = targets[name]
            if target.schema not in schemas:
                self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCRATCH}.{quote_ident(target.schema)}")
                schemas.add(target.schema)
            try:
                self.con.execute(
                    f"CREATE TABLE {target.qualified} AS SELECT * FROM ({compiled[name]}) AS rocky_ci_model "
                    "LIMIT 0"
                )
            except duckdb.CatalogException as exc:
                blocked.add(name)
                self._missing_table(name, compiled[name], exc)
                continue
            except duckdb.Error as exc:
                blocked.add(name)
                severity: Severity = "error" if self.strict else "warning"
                self.tally.add(severity, "C003", f"does not build: {_first_line(exc)}{self.dialect_note}",
                               self.pipeline, name)
                continue
            built.add(name)
            self.tally.built += 1
        return built

    def _missing_table(self, name: str, sql: str, exc: Exception) -> None:
        if self.sources and self.strict:
            self.tally.add(
                "error", "C003",
                f"does not build: {_first_line(exc)} (neither the warehouse nor a model has it)",
                self.pipeline, name,
            )
            return
        if self._parse_only(name, sql):
            self.tally.add("warning", "C004", f"not built: reads a table CI cannot see ({_first_line(exc)})",
                           self.pipeline, name)

    def _parse_only(self, name: str, sql: str) -> bool:
        """Syntax-check ``sql`` with DuckDB's parser; False (and a diagnostic) when it does not parse."""
        import json

        row = self.con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        doc = json.loads(row[0]) if row else {}
        if not doc.get("error"):
            return True
        severity: Severity = "error" if self.strict else "warning"
        message = str(doc.get("error_message", "syntax error"))
        self.tally.add(severity, "C003", f"does not parse: {message}{self.dialect_note}", self.pipeline, name)
        return False

    def session(self) -> Any:
        from rocky_engine.adapters.duckdb.adapter import DuckDbSession

        return DuckDbSession(self.con.cursor())

    def close(self) -> None:
        self.con.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- assertions -----------------------------------------------------------------------------------------


def _run_assertions(
    pipeline: TransformationPipeline, model_set: ModelSet, targets: dict[str, TableName],
    built: set[str], scratch: _Scratch, name: str, tally: _Tally, now: datetime,
) -> None:
    from rocky_engine.checks.assertions import TABLE_LEVEL, assertion_applies, run_assertion

    session = scratch.session()
    try:
        for assertion in pipeline.checks.assertions:
            label = assertion.display_name
            models = [m for m in model_set.order
                      if m in targets and assertion_applies(assertion.table, targets[m].asset_key)]
            if not models:
                tally.skipped += 1
                tally.add("info", "C007", f"assertion {label} on {assertion.table}: not a model of this "
                          "pipeline; not run in CI", name)
                continue
            for model in models:
                if model not in built:
                    tally.skipped += 1
                    continue
                check = run_assertion(session, assertion, targets[model].qualified, now)
                if check.error:
                    message = f"assertion {label} does not run: {check.error}"
                    tally.fail(f"{label} on {model}", check.error)
                    tally.add("error", "C006", message, name, model)
                elif assertion.type in TABLE_LEVEL:
                    tally.skipped += 1
                    message = f"assertion {label} needs data; its SQL was checked"
                    tally.add("info", "C007", message, name, model)
                elif check.passed:
                    tally.passed += 1
                else:  # pragma: no cover - an empty table has no failing rows
                    tally.fail(f"{label} on {model}", f"assertion {label} failed")
                    tally.add("error", "C006", f"assertion {label} failed", name, model)
    finally:
        session.close()
