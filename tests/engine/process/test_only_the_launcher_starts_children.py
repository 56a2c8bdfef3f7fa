"""Only ``rocky_engine/process/`` starts child processes: everything else goes through the launcher, so
every child gets the process group, the stop and the parent-death guarantee."""

from __future__ import annotations

import ast
from pathlib import Path

import rocky_engine

ROOT = Path(rocky_engine.__file__).parent
LAUNCHER = ROOT / "process"

#: modules whose import means "this file starts processes"
SPAWNING_MODULES = {
    "subprocess", "multiprocessing", "pty", "asyncio.subprocess", "concurrent.futures.process",
}
#: calls that start a process, by module
SPAWNING_CALLS = {
    "os": {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp",
           "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
           "spawnl", "spawnle", "spawnlp", "spawnlpe"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"fork", "spawn"},
}


def violations(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if _spawning_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if _spawning_module(node.module):
                found.append(f"from {node.module} import ...")
            banned = SPAWNING_CALLS.get(node.module, set())
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name in banned]
        elif (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.attr in SPAWNING_CALLS.get(node.value.id, set())
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return [f"{path.relative_to(root.parent)}:{v}" for v in found]


def _spawning_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in SPAWNING_MODULES)


def test_only_the_launcher_starts_child_processes() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if LAUNCHER not in path.parents:
            found += violations(path)
    assert found == []


def test_the_scan_sees_each_way_of_starting_a_process(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import subprocess\nimport multiprocessing.pool\nfrom os import fork\nimport os, asyncio\n"
        "os.posix_spawn('x', [], {})\nos.system('x')\nasyncio.create_subprocess_exec('x')\n"
    )
    found = [v.split(":", 1)[1] for v in violations(sample, root=tmp_path)]
    assert found == [
        "import subprocess", "import multiprocessing.pool", "from os import fork", "os.posix_spawn",
        "os.system", "asyncio.create_subprocess_exec",
    ]


def test_the_launcher_itself_is_where_the_scan_finds_them() -> None:
    # the rule is not vacuous: the launcher does start processes, and the scan would see it
    assert violations(LAUNCHER / "forkserver_client.py") and violations(LAUNCHER / "supervisor.py")
