"""A store where an older engine put it (beside the models of the first transformation pipeline) is found
and moved under the writer lock, or refused with the command to run; never silently replaced by an empty
one. Real ``rocky`` subprocesses, real SQLite WAL files, real ``kill -9``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rocky_engine.errors import StateError
from rocky_engine.project import load_project
from rocky_engine.state import StateStore, lock_path_of
from rocky_engine.state.relocate import settle_state_file
from tests.fixtures.projects import Cli, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
OLD_RUN = "run-20260301-080000-000"

#: writes one run into a store and dies by SIGKILL: the run is committed, but only in the -wal file
KILLED_WRITER = """
import os, signal, sys
from datetime import UTC, datetime
from rocky_engine.state import RunRecord, StateStore
store = StateStore.open(sys.argv[1])
t = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
store.runs.insert(RunRecord(run_id=sys.argv[2], pipeline="orders", started_at=t, finished_at=t,
                            status="Success"))
os.kill(os.getpid(), signal.SIGKILL)
"""

#: settles the state file with os.rename replaced: die before the move, or right after the database rename
CRASHING_MOVER = """
import os, signal, sys
point = sys.argv[1]
real_rename = os.rename

def rename(src, dst, *args, **kwargs):
    if point == "after_db_rename":
        real_rename(src, dst, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

os.rename = rename
from rocky_engine.project import load_project
load_project("rocky.toml").state_path()
print("survived")
"""


def write_project(root: Path, models: str = "models/staging/**", extra: str = "") -> Path:
    base = root / models.split("*")[0]
    base.mkdir(parents=True, exist_ok=True)
    (base / "good.sql").write_text("select 1 as x\n")
    (root / "models").mkdir(exist_ok=True)
    config = root / "rocky.toml"
    config.write_text(
        '[adapter]\ntype = "duckdb"\npath = "wh.duckdb"\n\n'
        f'[pipeline.orders]\ntype = "transformation"\nmodels = "{models}"\n{extra}'
    )
    return config


def seed(path: Path, run_id: str = OLD_RUN) -> None:
    """A store with one run, as the old engine left it after a crash (the run only in the WAL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path), run_id], capture_output=True)
    assert proc.returncode == -9, proc.stderr
    assert side(path, "-wal").stat().st_size > 0  # the frames are not in the database file yet


def side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def rocky(root: Path, *args: str) -> Cli:
    return run_rocky(["--output", "json", *args], cwd=root)


def messages(proc: Cli, needle: str) -> list[str]:
    found = []
    for line in proc.stderr.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            doc = {"message": line}
        if needle in doc.get("message", ""):
            found.append(doc["message"])
    return found


def run_ids(proc: Cli) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [r["run_id"] for r in proc.json["runs"]]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_project(tmp_path)
    return tmp_path


@pytest.mark.slow
def test_a_reader_moves_the_old_store_and_says_so_once(root: Path) -> None:
    old, new = root / "models" / "staging" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    first = rocky(root, "history")
    assert run_ids(first) == [OLD_RUN]
    assert messages(first, "moved the state store") == [
        f"moved the state store from {old} to {new}: a project's store now has one place, whatever the "
        "pipelines of rocky.toml and their models globs (CONTRACT section 5)"
    ]
    assert new.exists()
    assert not [p for p in (old, side(old, "-wal"), side(old, "-shm"), lock_path_of(old)) if p.exists()]
    again = rocky(root, "history")
    assert run_ids(again) == [OLD_RUN]
    assert messages(again, "moved") == []


@pytest.mark.slow
def test_a_run_moves_the_old_store_first_and_adds_to_it(root: Path) -> None:
    old, new = root / "models" / "staging" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    run = rocky(root, "run")
    assert run.returncode == 0, run.stderr
    assert len(messages(run, "moved the state store")) == 1
    assert not old.exists()
    history = run_ids(rocky(root, "history"))
    assert history == [run.json["run_id"], OLD_RUN]
    with StateStore.open(new, writer=False) as store:
        assert [r.run_id for r in store.runs.list()] == history


@pytest.mark.slow
def test_a_namespaced_store_moves_within_its_namespace(root: Path) -> None:
    old = root / "models" / "staging" / ".rocky-state" / "foo.db"
    new = root / "models" / ".rocky-state" / "foo.db"
    seed(old)
    seed(root / "models" / "staging" / ".rocky-state.db", "run-20260302-080000-000")  # another store
    assert run_ids(rocky(root, "--state-namespace", "foo", "history")) == [OLD_RUN]
    assert new.exists() and not old.exists()
    assert (root / "models" / "staging" / ".rocky-state.db").exists()  # the default store was not touched


@pytest.mark.slow
def test_a_store_in_the_config_dir_follows_a_new_models_dir(tmp_path: Path) -> None:
    """Before models/ existed the store sat beside rocky.toml; creating models/ must not empty it."""
    config = write_project(tmp_path, models="src/**")
    (tmp_path / "models").rmdir()
    seed(tmp_path / ".rocky-state.db")
    assert load_project(config, env={}).state_path() == tmp_path / ".rocky-state.db"
    (tmp_path / "models").mkdir()
    assert run_ids(rocky(tmp_path, "history")) == [OLD_RUN]
    assert (tmp_path / "models" / ".rocky-state.db").exists()
    assert not (tmp_path / ".rocky-state.db").exists()


@pytest.mark.slow
def test_two_stores_are_never_merged_or_overwritten(root: Path) -> None:
    old, new = root / "models" / "staging" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    seed(new, "run-20260305-080000-000")
    before = (digest(old), digest(new))
    expected = (
        f"error: this project has two state stores: {new} (1 run(s), newest run-20260305-080000-000), "
        f"where rocky keeps it now, and {old} (1 run(s), newest {OLD_RUN}), where an older rocky kept it; "
        f"rocky will not merge them or pick one; keep one and move the other away, e.g. mv {old} {old}.old "
        f"to keep {new}"
    )
    for args in (("history",), ("state",), ("run",)):
        proc = rocky(root, *args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.splitlines() == [expected]
    doctor = rocky(root, "doctor")
    assert doctor.returncode == 3
    state = next(c for c in doctor.json["checks"] if c["name"] == "state")
    assert state["status"] == "critical" and str(old) in state["message"] and str(new) in state["message"]
    assert (digest(old), digest(new)) == before


@pytest.mark.slow
def test_a_busy_old_store_is_read_in_place_and_never_written_in_place(root: Path) -> None:
    old, new = root / "models" / "staging" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    (root / "rocky.toml").write_text(
        (root / "rocky.toml").read_text() + '\n[pipeline.orders.schedule]\ncron = "* * * * *"\n'
    )
    holder = StateStore.open(old, writer=True)  # an older rocky still running against it
    try:
        history = rocky(root, "history")
        assert run_ids(history) == [OLD_RUN]
        assert messages(history, "reading it where it is") == [
            f"the state store at {old} (an older location) is held by another rocky process; reading it "
            f"where it is (the next command that finds it free moves it to {new})"
        ]
        run = rocky(root, "run")
        assert run.returncode == 1
        assert f"state store at {old} is locked by another process" in run.stderr
        assert f"moves to {new} once free" in run.stderr
        tick = rocky(root, "tick")
        assert tick.returncode == 0, tick.stderr
        assert [s["reason"] for s in tick.json["skipped"]] == ["state_busy"]
        assert old.exists() and not new.exists()
    finally:
        holder.close()
    assert run_ids(rocky(root, "history")) == [OLD_RUN]
    assert new.exists() and not old.exists()


@pytest.mark.slow
@pytest.mark.parametrize("point", ["before_db_rename", "after_db_rename"])
def test_kill_9_during_the_move_loses_nothing(root: Path, point: str) -> None:
    old, new = root / "models" / "staging" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    crash = subprocess.run([sys.executable, "-c", CRASHING_MOVER, point], cwd=root, capture_output=True)
    assert crash.returncode == -9, crash.stderr
    assert old.exists() == (point == "before_db_rename")
    assert new.exists() == (point == "after_db_rename")
    after = rocky(root, "history")
    assert run_ids(after) == [OLD_RUN]
    assert new.exists() and not old.exists()


@pytest.mark.slow
def test_a_store_outside_the_project_is_not_moved(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    write_project(root, models="../shared/models/**")
    old, new = tmp_path / "shared" / "models" / ".rocky-state.db", root / "models" / ".rocky-state.db"
    seed(old)
    proc = rocky(root, "history")
    assert proc.returncode == 1
    assert f"the state store at {old} (where an older rocky kept it" in proc.stderr
    assert f"mv {old} {new}" in proc.stderr and f"--state-path {old}" in proc.stderr
    assert old.exists() and not new.exists()
    assert run_ids(rocky(root, "--state-path", str(old), "history")) == [OLD_RUN]


def test_several_old_stores_and_symlinks_are_refused(tmp_path: Path) -> None:
    new = tmp_path / "models" / ".rocky-state.db"
    a, b = tmp_path / "a" / ".rocky-state.db", tmp_path / "b" / ".rocky-state.db"
    for path in (a, b):
        path.parent.mkdir()
        StateStore.open(path).close()
    (tmp_path / "models").mkdir()
    with pytest.raises(StateError) as info:
        settle_state_file(new, [a, b], project_dir=tmp_path, reading=True)
    assert str(info.value) == (
        f"this project has state stores at several older locations: {a} (no runs), {b} (no runs); rocky "
        f"will not merge them or pick one; keep one (mv <it> {new}) and move the others away"
    )
    link = tmp_path / "c" / ".rocky-state.db"
    link.parent.mkdir()
    link.symlink_to(a)
    with pytest.raises(StateError) as info:
        settle_state_file(new, [link], project_dir=tmp_path, reading=False)
    assert str(info.value).startswith(f"the state store at {link} (an older location) is a symlink")
    assert a.exists() and link.is_symlink() and not new.exists()


def test_an_unreadable_old_file_is_refused_with_the_mv(tmp_path: Path) -> None:
    old, new = tmp_path / "m" / ".rocky-state.db", tmp_path / "models" / ".rocky-state.db"
    old.parent.mkdir()
    (tmp_path / "models").mkdir()
    old.write_bytes(os.urandom(4096))
    with pytest.raises(StateError) as info:
        settle_state_file(new, [old], project_dir=tmp_path, reading=False)
    assert str(info.value).startswith(f"cannot move the state store at {old} to {new}: SQLite cannot open it")
    assert str(info.value).endswith(f"run: mv {old} {new}")
    assert old.exists() and not new.exists()
