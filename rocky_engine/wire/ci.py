"""The ``rocky ci`` document: validate + compile + build with zero rows + assertions.

``exit_code`` lives in the document (1 errors, 4 advisory warnings, 0 clean); the process exits 0 for 4.
Severities are the published enum (``Error``, ``Warning``, ``Info``); every diagnostic names its ``model``
(``""`` when it is about the project or a pipeline); ``failures[]`` lists each failed test with its error.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rocky_engine import __version__
from rocky_engine.wire.base import WireModel

CiSeverity = Literal["Error", "Warning", "Info"]


class CiDiagnostic(WireModel):
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"model"})

    severity: CiSeverity
    #: ``Cnnn`` for CI's own findings, ``Vnnn`` for validate's
    code: str
    message: str
    pipeline: str | None = None
    #: the model the finding is about; ``""`` for a finding about the project or a whole pipeline
    model: str = ""


class CiTestFailure(WireModel):
    """One failed test: the assertion (``label`` on the model) and why."""

    name: str
    error: str


class CiResult(WireModel):
    """``{version, command: "ci", exit_code, compile_ok, tests_ok, models_compiled, models_built,
    tests_passed, tests_failed, tests_skipped, diagnostics[], failures[]}``."""

    ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"version", "command", "ci_exit_code", "compile_ok", "tests_ok", "models_compiled", "models_built",
         "tests_passed", "tests_failed", "tests_skipped", "diagnostics", "failures"}
    )

    version: str = __version__
    command: Literal["ci"] = "ci"
    #: named apart from the key because the engine's result also has an ``exit_code()`` method
    ci_exit_code: Literal[0, 1, 4] = Field(alias="exit_code")
    compile_ok: bool
    tests_ok: bool
    models_compiled: int = 0
    models_built: int = 0
    tests_passed: int = 0
    tests_failed: int = 0
    tests_skipped: int = 0
    diagnostics: list[CiDiagnostic] = Field(default_factory=list)
    failures: list[CiTestFailure] = Field(default_factory=list)
