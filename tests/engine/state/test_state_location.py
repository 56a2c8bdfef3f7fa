"""Which state file a project uses: the one rule of CONTRACT section 5, and where older engines put it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.errors import UsageError
from rocky_engine.project import load_project, project_state_file
from rocky_engine.state.location import legacy_state_files, state_file

HEADER = '[adapter.default]\ntype = "duckdb"\npath = "wh.duckdb"\n'


def pipeline(name: str, models: str) -> str:
    return f'\n[pipeline.{name}]\ntype = "transformation"\nmodels = "{models}"\n'


def test_state_path_wins_and_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "models").mkdir()
    assert state_file(tmp_path, state_path="sub/s.db", namespace="ns") == work / "sub" / "s.db"


def test_absolute_state_path_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "x.db"
    assert state_file(tmp_path, state_path=str(target), namespace=None) == target


def test_default_is_in_the_models_dir_when_it_exists(tmp_path: Path) -> None:
    assert state_file(tmp_path, state_path=None, namespace=None) == tmp_path / ".rocky-state.db"
    (tmp_path / "models").mkdir()
    assert state_file(tmp_path, state_path=None, namespace=None) == tmp_path / "models" / ".rocky-state.db"


def test_a_file_named_models_is_not_the_models_dir(tmp_path: Path) -> None:
    (tmp_path / "models").write_text("not a dir")
    assert state_file(tmp_path, state_path=None, namespace=None) == tmp_path / ".rocky-state.db"


def test_namespace_lives_under_the_same_base(tmp_path: Path) -> None:
    assert state_file(tmp_path, state_path=None, namespace="ci") == tmp_path / ".rocky-state" / "ci.db"
    (tmp_path / "models").mkdir()
    path = state_file(tmp_path, state_path=None, namespace="tenant_A1")
    assert path == tmp_path / "models" / ".rocky-state" / "tenant_A1.db"


@pytest.mark.parametrize("bad", ["a-b", "", "../x", "a b", "x.db", "ümlaut", "a/b"])
def test_bad_namespace_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    for flag in (None, "s.db"):  # also with --state-path: the namespace still names the remote state
        with pytest.raises(UsageError) as info:
            state_file(tmp_path, state_path=flag, namespace=bad)
        assert str(info.value) == f"invalid --state-namespace '{bad}': use letters, digits and _ only"


def test_relative_config_dir_gives_an_absolute_normalised_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj" / "models").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj" / "models")
    path = state_file(Path("../../proj"), state_path=None, namespace=None)
    assert path == tmp_path / "proj" / "models" / ".rocky-state.db"


@pytest.mark.parametrize("namespace", [None, "k1"])
def test_the_answer_ignores_the_pipelines_and_their_order(tmp_path: Path, namespace: str | None) -> None:
    """Old rule: the models dir of the first transformation pipeline. New rule: the config dir only."""
    for sub in ("models/staging", "src"):
        (tmp_path / sub).mkdir(parents=True)
    config = tmp_path / "rocky.toml"
    answers = set()
    for body in (
        pipeline("a", "models/staging/**") + pipeline("b", "src/**"),
        pipeline("b", "src/**") + pipeline("a", "models/staging/**"),
        pipeline("c", "src/*.sql"),
        "",
    ):
        config.write_text(HEADER + body)
        project = load_project(config, state_namespace=namespace, env={})
        answers.add(project.state_path())
        answers.add(project_state_file(config, state_path=None, namespace=namespace))
    base = tmp_path / "models"
    assert answers == {base / ".rocky-state.db" if namespace is None else base / ".rocky-state" / "k1.db"}


def test_a_broken_or_missing_config_still_finds_the_store(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    assert project_state_file(config, state_path=None, namespace=None) == tmp_path / ".rocky-state.db"
    config.write_text("[pipeline.x\n")
    (tmp_path / "models").mkdir()
    assert project_state_file(config, state_path=None, namespace="n") == (
        tmp_path / "models" / ".rocky-state" / "n.db"
    )


def test_legacy_files_are_the_old_models_dirs_and_the_config_dir(tmp_path: Path) -> None:
    current = tmp_path / "models" / ".rocky-state.db"
    staging, src = tmp_path / "models" / "staging", tmp_path / "src"
    for d in (staging, src):
        d.mkdir(parents=True)
    assert legacy_state_files(tmp_path, [staging, src], None, current) == []
    for old in (staging / ".rocky-state.db", src / ".rocky-state.db", tmp_path / ".rocky-state.db"):
        old.write_bytes(b"")
    current.write_bytes(b"")  # the current file itself is never listed
    found = legacy_state_files(tmp_path, [staging, src, staging], None, current)
    assert found == [tmp_path / ".rocky-state.db", staging / ".rocky-state.db", src / ".rocky-state.db"]
    # a glob that names the current directory by another spelling is not an old location
    assert legacy_state_files(tmp_path, [tmp_path / "models" / ".." / "models"], None, current) == [
        tmp_path / ".rocky-state.db"
    ]


def test_legacy_namespaced_files(tmp_path: Path) -> None:
    staging = tmp_path / "models" / "staging"
    (staging / ".rocky-state").mkdir(parents=True)
    (staging / ".rocky-state" / "foo.db").write_bytes(b"")
    (staging / ".rocky-state.db").write_bytes(b"")  # the default store is not the namespace's
    current = tmp_path / "models" / ".rocky-state" / "foo.db"
    assert legacy_state_files(tmp_path, [staging], "foo", current) == [staging / ".rocky-state" / "foo.db"]
    other = tmp_path / "models" / ".rocky-state" / "bar.db"
    assert legacy_state_files(tmp_path, [staging], "bar", other) == []
