"""``--resume RUN_ID`` / ``--resume-latest`` for replication runs (CONTRACT section 3 "Resume").

A replication run records each table in ``run_progress`` as it finishes, so even a run killed midway
(no run record) can be resumed. Resuming skips the tables the named run finished successfully (a
resumed run carries those over into its own progress, so resuming *it* skips them too) and runs under a
new run id. ``--resume-latest`` picks the newest run of the pipeline that recorded progress; with none,
the run copies every table. An unknown ``--resume`` id, or a run of another pipeline, is an error.

Resume only ever skips what a run that did *not* succeed finished: when the newest attempt the store
knows of is a ``Success`` (also when a later attempt was killed before it wrote anything), there is
nothing to resume and ``--resume-latest`` is an ordinary incremental run; its document says so
(``resume_note``, no ``resumed_from``). Skipping what a success copied would copy nothing new, forever,
under a cron wrapper that always passes the flag.

Without ``--pipeline`` on a project of several pipelines (the published client's ``resume_run()`` sends
none), a resume runs the replication pipeline it is about: the one configured, else the pipeline of the
``--resume`` run, else the one whose run recorded progress last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.errors import UsageError

if TYPE_CHECKING:
    import logging

    from rocky_engine.project import Project
    from rocky_engine.run.options import RunOptions
    from rocky_engine.state.store import StateStore


@dataclass(frozen=True)
class ResumePoint:
    #: the run resumed from; None when ``--resume-latest`` found nothing to resume (see ``note``)
    run_id: str | None
    completed: frozenset[str]
    #: why ``--resume-latest`` resumed nothing (the run's ``resume_note``)
    note: str | None = None


def resolve_resume(
    store: StateStore, options: RunOptions, pipeline: str, pipeline_type: str, log: logging.Logger
) -> ResumePoint | None:
    """The run to resume from and its finished table keys; None when not resuming.

    Raises:
        UsageError: resume of a non-replication pipeline, an unknown run id, or another pipeline's run.
    """
    if not options.resume and not options.resume_latest:
        return None
    if options.idempotency_key:
        raise UsageError(
            "--idempotency-key cannot be combined with --resume/--resume-latest",
            hint="drop one of them: a resume is a new attempt of a specific run, a key dedupes runs",
        )
    if pipeline_type != "replication":
        raise UsageError(
            f"--resume/--resume-latest apply to replication pipelines; '{pipeline}' is a {pipeline_type} "
            "pipeline",
            hint="run it again without the flag",
        )
    if options.resume:
        run_id = options.resume
        owner = _owner(store, run_id)
        if owner is None:
            raise UsageError(
                f"run '{run_id}' not found in the state store at {store.path}; list runs with `rocky history`"
            )
        if owner and owner != pipeline:
            raise UsageError(
                f"run '{run_id}' is a run of pipeline '{owner}', not '{pipeline}'",
                hint=f"resume it with --pipeline {owner}, or pick a run of '{pipeline}' from `rocky history`",
            )
    else:
        latest = store.progress.latest_run_id(pipeline)
        if latest is None:
            log.info("--resume-latest: no earlier run of pipeline '%s' recorded progress; "
                     "copying every table", pipeline)
            return None
        success = store.runs.latest(pipeline, status="Success")
        if success is not None and not success.interrupted and success.run_id >= latest:
            note = (f"nothing to resume: the latest run of pipeline '{pipeline}' ({success.run_id}) "
                    "succeeded; running as an ordinary incremental run")
            log.info("--resume-latest: %s", note)
            return ResumePoint(None, frozenset(), note)
        run_id = latest
    return ResumePoint(run_id, frozenset(store.progress.completed_keys(run_id)))


def _owner(store: StateStore, run_id: str) -> str | None:
    """The pipeline of ``run_id`` ("" when unknown but the run exists); None when no such run."""
    rows = store.query("SELECT pipeline FROM run_progress WHERE run_id = ? LIMIT 1", (run_id,))
    if rows:
        return str(rows[0][0] or "")
    record = store.runs.get(run_id)
    if record is None:
        return None
    return record.pipeline or ""


def resume_pipeline(project: Project, run_id: str | None) -> str:
    """The replication pipeline a resume without ``--pipeline`` runs (see the module docstring).

    Raises:
        UsageError: no replication pipeline; several and the store does not say which (naming them).
    """
    names = [n for n, p in project.config.pipelines.items() if p.type == "replication"]
    hint = "choose one with --pipeline NAME"
    if not names:
        raise UsageError("--resume/--resume-latest apply to replication pipelines; this project has none",
                         hint="run it again without the flag")
    if len(names) == 1:
        return names[0]
    from rocky_engine.state.store import StateStore

    path = project.state_path(reading=True)
    owner: str | None = None
    if path.exists():
        with StateStore.open(path, writer=False) as store:
            if run_id is not None:
                owner = _owner(store, run_id) or None
            else:
                marks = ", ".join("?" for _ in names)
                rows = store.query(
                    f"SELECT pipeline FROM run_progress WHERE pipeline IN ({marks}) "
                    "ORDER BY run_id DESC LIMIT 1",
                    tuple(names),
                )
                owner = str(rows[0][0]) if rows else None
    if owner in names:
        return owner
    which = f"run '{run_id}'" if run_id else "the latest resumable run"
    raise UsageError(f"cannot tell which replication pipeline ({', '.join(names)}) {which} belongs to",
                     hint=hint)
