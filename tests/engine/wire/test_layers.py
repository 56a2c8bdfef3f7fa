"""The wire module is the one declaration of the format: the engine's results add no field to it, nothing
else in the engine declares a document shape, and ``dagster_rocky`` reads the engine only through it."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import rocky_engine
from rocky_engine.output import Result
from rocky_engine.wire.base import WireModel

REPO = Path(__file__).resolve().parents[3]


def _import_engine() -> None:
    for info in pkgutil.walk_packages(rocky_engine.__path__, "rocky_engine."):
        importlib.import_module(info.name)


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return {c for c in found if c.__module__.startswith("rocky_engine")}


def _wire_base(cls: type) -> type[WireModel] | None:
    for base in cls.__mro__[1:]:
        if base.__module__.startswith("rocky_engine.wire.") and issubclass(base, WireModel):
            return base
    return None


def test_every_engine_result_is_its_wire_document_with_no_field_of_its_own() -> None:
    """Engine classes over a wire model (command results, the hook event) add behaviour, never a field:
    what the engine writes is what the wire model declares, and what the wire model reads."""
    _import_engine()
    results = _subclasses(Result)
    assert len(results) >= 15  # every command's result (run, discover, history x2, state x3, tick, ...)
    assert all(issubclass(cls, WireModel) for cls in results)
    engine_side = {c for c in _subclasses(WireModel) if not c.__module__.startswith("rocky_engine.wire.")}
    assert results <= engine_side
    for cls in engine_side:
        base = _wire_base(cls)
        assert base is not None, f"{cls.__module__}.{cls.__name__} declares a shape outside rocky_engine.wire"
        ours = {n: (f.annotation, f.alias) for n, f in cls.model_fields.items()}
        theirs = {n: (f.annotation, f.alias) for n, f in base.model_fields.items()}
        assert ours == theirs, f"{cls.__name__} declares fields its wire model {base.__name__} does not"


def _engine_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n == "rocky_engine" or n.startswith("rocky_engine.")]


def test_dagster_rocky_imports_the_engine_only_through_its_wire_module() -> None:
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "dagster_rocky").rglob("*.py")):
        bad = [n for n in _engine_imports(path)
               if n != "rocky_engine.wire" and not n.startswith("rocky_engine.wire.")]
        if bad:
            seen[str(path.relative_to(REPO))] = bad
    assert seen == {}
    # and at run time, importing the integration loads no other engine module
    probe = (
        "import sys, dagster_rocky, dagster_rocky.execution, dagster_rocky.pipes\n"
        "print(sorted(m for m in sys.modules if m.startswith('rocky_engine.') "
        "and not m.startswith('rocky_engine.wire')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_dagster_rocky_types_only_re_exports() -> None:
    tree = ast.parse((REPO / "dagster_rocky" / "types.py").read_text())
    assert [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] == []
    import dagster_rocky
    import dagster_rocky.types as types

    for name in types.__all__:
        value = getattr(types, name)
        if isinstance(value, type):
            assert value.__module__.startswith("rocky_engine.wire."), name
    for name in ("CheckResult", "DiscoverResult", "FailedSourceOutput", "MaterializationInfo", "RunResult",
                 "SourceInfo", "TableCheckResult", "TableError", "TableInfo"):
        assert getattr(dagster_rocky, name) is getattr(types, name)
