"""Which state file a project uses: CONTRACT section 5 location rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocky_engine.errors import UsageError
from rocky_engine.state.location import models_dir_of_glob, project_state_path, resolve_state_path


def test_state_path_wins_and_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    models = tmp_path / "models"
    models.mkdir()
    path = resolve_state_path(config_dir=tmp_path, models_dir=models, state_path="sub/s.db", namespace="ns")
    assert path == work / "sub" / "s.db"


def test_absolute_state_path_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "x.db"
    path = resolve_state_path(config_dir=tmp_path, models_dir=None, state_path=str(target), namespace=None)
    assert path == target


def test_namespace_goes_under_models_dir(tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = resolve_state_path(config_dir=tmp_path, models_dir=models, state_path=None, namespace="tenant_A1")
    assert path == models / ".rocky-state" / "tenant_A1.db"


def test_namespace_without_models_dir_goes_under_config_dir(tmp_path: Path) -> None:
    path = resolve_state_path(config_dir=tmp_path, models_dir=None, state_path=None, namespace="ci")
    assert path == tmp_path / ".rocky-state" / "ci.db"


@pytest.mark.parametrize("bad", ["a-b", "", "../x", "a b", "x.db", "ümlaut", "a/b"])
def test_bad_namespace_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_state_path(config_dir=tmp_path, models_dir=None, state_path=None, namespace=bad)
    assert str(info.value) == f"invalid --state-namespace '{bad}': use letters, digits and _ only"


def test_default_is_in_existing_models_dir(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    path = resolve_state_path(config_dir=tmp_path, models_dir=models, state_path=None, namespace=None)
    assert path == models / ".rocky-state.db"


def test_default_without_models_dir_on_disk_is_config_dir(tmp_path: Path) -> None:
    path = resolve_state_path(
        config_dir=tmp_path, models_dir=tmp_path / "models", state_path=None, namespace=None
    )
    assert path == tmp_path / ".rocky-state.db"
    # a file named like the models dir is not a directory
    (tmp_path / "models").write_text("not a dir")
    path = resolve_state_path(
        config_dir=tmp_path, models_dir=tmp_path / "models", state_path=None, namespace=None
    )
    assert path == tmp_path / ".rocky-state.db"


def test_default_with_no_models_dir_given(tmp_path: Path) -> None:
    path = resolve_state_path(config_dir=tmp_path, models_dir=None, state_path=None, namespace=None)
    assert path == tmp_path / ".rocky-state.db"


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("models/**", "models"),
        ("models/staging/*.sql", "models"),
        ("sql", "sql"),
        ("**/*.sql", "models"),
        ("*.sql", "models"),
        ("/abs/dir/**", "/abs/dir"),
    ],
)
def test_models_dir_of_glob(glob: str, expected: str) -> None:
    assert models_dir_of_glob(glob) == Path(expected)


def test_project_without_config_uses_its_directory(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    assert project_state_path(config, None, None) == tmp_path / ".rocky-state.db"
    (tmp_path / "models").mkdir()
    assert project_state_path(config, None, None) == tmp_path / "models" / ".rocky-state.db"
    assert project_state_path(config, None, "k1") == tmp_path / "models" / ".rocky-state" / "k1.db"


def test_project_with_invalid_config_falls_back(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    config.write_text("[pipeline.x\n")
    (tmp_path / "models").mkdir()
    assert project_state_path(config, None, None) == tmp_path / "models" / ".rocky-state.db"


def test_project_models_dir_comes_from_transformation_glob(tmp_path: Path) -> None:
    config = tmp_path / "rocky.toml"
    config.write_text(
        '[adapter.default]\ntype = "duckdb"\n\n'
        '[pipeline.models]\ntype = "transformation"\nmodels = "src/**"\n\n'
        '[pipeline.models.target]\nadapter = "default"\n'
    )
    # src does not exist yet: the config directory
    assert project_state_path(config, None, None) == tmp_path / ".rocky-state.db"
    (tmp_path / "src").mkdir()
    (tmp_path / "models").mkdir()
    assert project_state_path(config, None, None) == tmp_path / "src" / ".rocky-state.db"
    assert project_state_path(config, None, "n") == tmp_path / "src" / ".rocky-state" / "n.db"


def test_project_relative_config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proj" / "models").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    path = project_state_path(Path("proj/rocky.toml"), None, None)
    assert path == tmp_path / "proj" / "models" / ".rocky-state.db"
    assert path.is_absolute()
