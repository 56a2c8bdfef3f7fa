"""Adapters own their dialect: no module outside ``rocky_engine/adapters/`` decides by a warehouse's name.

The engine is read as source (``ast``), so the guard also catches the disguised forms: a comparison with
a dialect or adapter-type name, an ``isinstance`` against an adapter or its config class, an import of an
adapter's driver module, and the type names themselves as string constants. ``config/adapters.py`` is the
one place outside ``adapters/`` that spells the types: it declares the ``[adapter]`` models.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rocky_engine
from rocky_engine.adapters.registry import PLUGINS

ENGINE = Path(rocky_engine.__file__).parent
ALLOWED = {ENGINE / "config" / "adapters.py"}
#: classes that stand for one adapter type
TYPE_CLASSES = {"DuckDbAdapter", "DuckDbSession", "PostgresAdapter", "PostgresSession", "DuckDbAdapterConfig",
                "PostgresAdapterConfig", "FivetranAdapterConfig", "DuckDbDialect", "PostgresDialect"}


def _outside_adapters() -> list[Path]:
    return sorted(p for p in ENGINE.rglob("*.py") if "adapters" not in p.relative_to(ENGINE).parts[:1]
                  and p not in ALLOWED)


def _findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set(PLUGINS)
    found: list[str] = []
    shown = path.relative_to(ENGINE.parent) if path.is_relative_to(ENGINE.parent) else path
    for node in ast.walk(tree):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names:
            found.append(f"{where}: the adapter type name {node.value!r}")
        elif isinstance(node, ast.Compare):
            text = ast.unparse(node)
            if "dialect" in text.split("(")[0] and any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn)
                                                       for op in node.ops):
                found.append(f"{where}: a dialect compared: {text}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
            text = ast.unparse(node)
            if any(cls in text for cls in TYPE_CLASSES):
                found.append(f"{where}: isinstance against one adapter type: {text}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["rocky_engine", "adapters"] and len(parts) > 2 and parts[2] in names:
                imported = {a.name for a in node.names}
                if parts[-1] != "plugin" and not imported <= {"DuckDbSession"}:
                    found.append(f"{where}: imports the {parts[2]} adapter itself ({node.module})")
    return found


def test_no_dialect_decision_outside_the_adapters() -> None:
    found = [f for path in _outside_adapters() for f in _findings(path)]
    assert found == []


def test_the_guard_sees_each_disguise(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(adapter, dialect, cfg):\n"
        "    if adapter.type == 'postgres':\n"
        "        pass\n"
        "    if dialect != other:\n"
        "        pass\n"
        "    if isinstance(cfg, DuckDbAdapterConfig):\n"
        "        pass\n"
        "from rocky_engine.adapters.postgres.refresh import replace_table\n"
    )
    found = sorted(_findings(probe), key=lambda f: int(f.split(": ", 1)[0].rsplit(":", 1)[1]))
    assert [f.split(": ", 1)[1].split(" ")[0:2] for f in found] == [
        ["the", "adapter"], ["a", "dialect"], ["isinstance", "against"], ["imports", "the"],
    ], found
