"""What the ``rocky`` process imports at start-up: the gains that matter, pinned by module name (not time).

Each probe runs the real entry point (``main``) in a fresh interpreter and lists, at exit, which of the
named modules were loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PROBE = (
    "import atexit, sys\n"
    "from rocky_engine.cli.main import main\n"
    "names = {names!r}\n"
    "def probe():\n"
    "    loader = type(sys.modules.get('pydantic.plugin._loader')).__name__\n"
    "    loaded = sorted(n for n in names if n in sys.modules)\n"
    "    sys.stderr.write(f'PROBE loaded={{\",\".join(loaded)}} loader={{loader}}\\n')\n"
    "atexit.register(probe)\n"
    "main({argv!r})\n"
)
#: what pydantic's plugin discovery would import (importlib.metadata and what it pulls in)
_DISCOVERY = ("importlib.metadata", "email", "zipfile", "csv")


def _probe(argv: list[str], names: tuple[str, ...], env: dict[str, str] | None = None,
           cwd: Path | None = None) -> tuple[int, str]:
    full = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | (env or {})
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(names=names, argv=argv)], capture_output=True,
                          text=True, timeout=60, env=full, cwd=cwd)
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE ")), proc.stderr)
    return proc.returncode, line


def _project(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("SELECT 1 AS x")
    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "duckdb"\npath = "w.duckdb"\n\n[pipeline.t]\ntype = "transformation"\n'
        'models = "models/**"\n\n[pipeline.t.target]\nadapter = "default"\n'
    )
    return tmp_path


def test_validate_skips_pydantic_plugin_discovery(tmp_path: Path) -> None:
    cwd = _project(tmp_path)
    code, line = _probe(["validate", "--output", "json"], _DISCOVERY, cwd=cwd)
    assert code == 0, line
    # pydantic built the config models through the stand-in, and importlib.metadata was never loaded
    assert line == "PROBE loaded= loader=_NoPluginLoader"


def test_a_user_choice_of_plugins_gets_the_real_loader(tmp_path: Path) -> None:
    cwd = _project(tmp_path)
    code, line = _probe(["validate", "--output", "json"], ("importlib.metadata",),
                        env={"PYDANTIC_DISABLE_PLUGINS": "some_plugin"}, cwd=cwd)
    assert code == 0, line
    assert line == "PROBE loaded=importlib.metadata loader=module"


_FALLBACK = """
import os, sys
from rocky_engine.cli.pydantic_plugins import LOADER, disable_plugins
disable_plugins(os.environ)
stand_in = sys.modules[LOADER]
from pydantic import BaseModel
class A(BaseModel):
    x: int
assert A(x="1").x == 1
assert "importlib.metadata" not in sys.modules
assert list(stand_in.get_plugins()) == []
# plugins switched back on at run time: the real loader answers (and takes its place)
os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""
assert list(stand_in.get_plugins()) == []
assert type(sys.modules[LOADER]).__name__ == "module" and "importlib.metadata" in sys.modules
# any other name is the real loader's
assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"
print("OK")
"""


def test_the_stand_in_defers_to_pydantics_loader() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    proc = subprocess.run([sys.executable, "-c", _FALLBACK], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "OK\n"


def test_validate_of_a_spark_project_never_imports_pyspark(tmp_path: Path) -> None:
    # An atomic merge on undeclared Spark: V021 needs the Spark plugin's declared level, which must come
    # without the driver (validate never connects).
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.sql").write_text("SELECT 1 AS id")
    (tmp_path / "models" / "m.toml").write_text(
        '[strategy]\ntype = "merge"\nunique_key = ["id"]\natomic = true\n')
    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "spark"\nremote = "sc://127.0.0.1:1"\n\n[pipeline.t]\ntype = "transformation"\n'
        'models = "models/**"\n'
    )
    names = ("pyspark", "grpc", "pyarrow", "rocky_engine.adapters.spark.plugin")
    code, line = _probe(["validate", "--output", "json"], names, cwd=tmp_path)
    assert code == 1, line  # V021: the plugin was consulted
    assert line.startswith("PROBE loaded=rocky_engine.adapters.spark.plugin "), line


def test_validate_of_a_connector_project_loads_its_manifest_without_the_runner(tmp_path: Path) -> None:
    # V019 reads the manifest with the loader `rocky load --connector` uses; that loader is config, so the
    # runner (and the duckdb / pyarrow it stages with) stays out of validate.
    (tmp_path / "conn").mkdir()
    (tmp_path / "conn" / "connector.toml").write_text(
        'protocol_version = 1\nname = "c"\ncommand = ["./main.py"]\nstate_schema_version = 1\n'
        "egress_hosts = []\n")
    (tmp_path / "rocky.toml").write_text(
        '[adapter]\ntype = "duckdb"\npath = "w.duckdb"\n\n[connector.c]\nmanifest = "conn/connector.toml"\n'
        'output_uri = "file://./landing"\ntarget = { catalog = "w", schema = "raw", table = "t" }\n'
    )
    names = ("duckdb", "pyarrow", "rocky_engine.connectors", "rocky_engine.config.connector_manifest")
    code, line = _probe(["validate", "--output", "json"], names, cwd=tmp_path)
    assert code == 1, line  # V019: protocol_version 1, so the manifest was read
    assert line.startswith("PROBE loaded=rocky_engine.config.connector_manifest "), line
