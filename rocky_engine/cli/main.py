"""The ``rocky`` entry point: global flags, command dispatch, error-to-exit-code mapping.

Command modules are listed in ``COMMANDS``; each exposes ``register(subparsers, common)`` and
``execute(args) -> Result``. Command modules keep their top level light (argparse only) so that
``rocky --help`` never imports duckdb, pyarrow, httpx or starlette.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from rocky_engine import __version__

if TYPE_CHECKING:
    from rocky_engine.output import OutputFormat

#: command name -> module implementing it (order is the order in ``rocky --help``)
COMMANDS: dict[str, str] = {
    "run": "rocky_engine.cli.run_cmd",
    "discover": "rocky_engine.cli.discover_cmd",
    "dag": "rocky_engine.cli.dag_cmd",
    "load": "rocky_engine.cli.load_cmd",
    "validate": "rocky_engine.cli.validate_cmd",
    "history": "rocky_engine.cli.history_cmd",
    "state": "rocky_engine.cli.state_cmd",
    "tick": "rocky_engine.cli.tick_cmd",
    "serve": "rocky_engine.cli.serve_cmd",
    "doctor": "rocky_engine.cli.doctor_cmd",
    "brief": "rocky_engine.cli.brief_cmd",
    "ci": "rocky_engine.cli.ci_cmd",
    "hooks": "rocky_engine.cli.hooks_cmd",
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage, which would read as partial success; Rocky exits 1."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(1)


def _common_flags(suppress: bool) -> argparse.ArgumentParser:
    """Global flags, accepted both before and after the command name (``rocky run --output json``)."""
    default = argparse.SUPPRESS if suppress else None
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", default=argparse.SUPPRESS if suppress else "rocky.toml",
        help="path to rocky.toml (default: rocky.toml)",
    )
    common.add_argument(
        "-o", "--output", choices=["json", "table", "md"], default=default,
        help="output format (default: table on a terminal, json when piped)",
    )
    common.add_argument(
        "--state-path", default=default, help="state store file (overrides the default location)"
    )
    common.add_argument(
        "--state-namespace", default=default,
        help="use <models>/.rocky-state/<KEY>.db instead of the default store (KEY: letters, digits, _)",
    )
    return common


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    parser = _Parser(
        prog="rocky",
        description="Rocky: SQL pipelines (replication, transformation, quality, snapshot, load) with "
        "run history, resumable replication, idempotency and a built-in scheduler.",
        parents=[_common_flags(suppress=False)],
        epilog="Exit codes: 0 success, 1 failure, 2 partial success, 3 critical doctor check, "
        "130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"rocky {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    sub.required = True
    modules: dict[str, ModuleType] = {}
    common = _common_flags(suppress=True)
    for name, module_path in COMMANDS.items():
        module = importlib.import_module(module_path)
        module.register(sub, common)
        modules[name] = module
    return parser, modules


#: Commands whose process ends once the result is written, with every store, warehouse connection and
#: file they opened already closed: they skip the interpreter's exit-time garbage collection. That is
#: every command; `serve` returns only after its drain has stopped the server and its children.
_FREEZE_AT_EXIT = frozenset(COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and exit with its code."""
    code, command = _dispatch(argv, entry_point=True)
    if command in _FREEZE_AT_EXIT:
        _skip_exit_collection()
    sys.exit(code)


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Run one command in this process and return its exit code (``main`` without the exit)."""
    return _dispatch(argv)[0]


def _skip_exit_collection() -> None:
    """Spare the interpreter's full collections at exit (~20 ms of a quiet ``rocky tick``).

    Shutting down, CPython runs full garbage collections over every object still alive: the modules and
    the loaded project, none of them garbage. ``gc.freeze`` moves them out of the collector's reach;
    objects are still freed by reference counting as modules are torn down. Only the process entry point
    calls this, after the command has released what it opened (an in-process caller keeps its collector).
    """
    import gc

    gc.freeze()


def _dispatch(argv: Sequence[str] | None, *, entry_point: bool = False) -> tuple[int, str]:
    """(exit code, command name) of one command run in this process."""
    _sigterm_as_interrupt()
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    if entry_point:
        # Rocky uses no pydantic plugins: their discovery (and the import behind it) is a real share of a
        # quiet `rocky tick` every minute and of `rocky validate`. Only the entry point switches it off (not
        # run_cli, which tests and embedders call in-process), once the arguments parse (`--help` never
        # loads pydantic); a value the user set wins. Children (`rocky run` from tick, hook commands)
        # inherit the variable like the rest of the environment.
        from rocky_engine.cli.pydantic_plugins import disable_plugins

        disable_plugins(os.environ)
    # Imported only once the arguments parse: `rocky --help` and usage errors never load pydantic
    # (rocky_engine.output) or logging.
    from rocky_engine import logs
    from rocky_engine.output import resolve_format

    fmt = resolve_format(args.output)
    args.output_format = fmt
    logs.configure(json_lines=fmt == "json", level=_log_level())
    command: str = args.command
    from rocky_engine.state.lock_holder import name_command

    name_command(command, getattr(args, "connector", None) or getattr(args, "pipeline", None))
    return _execute(modules[command], args, fmt), command


def _execute(module: ModuleType, args: argparse.Namespace, fmt: OutputFormat) -> int:
    """Run the command, write its result in ``fmt``; every failure becomes a one-line error and a code."""
    from rocky_engine.errors import RockyError
    from rocky_engine.output import emit

    try:
        result = module.execute(args)
        code = emit(result, fmt)
        # A result may act once it has been written out in full (brief advances its --since last cursor).
        after_emit = getattr(result, "after_emit", None)
        if callable(after_emit):
            after_emit()
        return code
    except RockyError as exc:
        from rocky_engine.redact import redact

        sys.stderr.write(redact(f"error: {exc}\n"))
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: say so in one line, keep the traceback for ROCKY_LOG=debug
        import logging
        import traceback

        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: {exc}); this is a bug in rocky, please report it "
            "with the output of the same command run with ROCKY_LOG=debug\n"
        )
        if _log_level() <= logging.DEBUG:
            traceback.print_exc()
        return 1


def _sigterm_as_interrupt() -> None:
    """SIGTERM before a command installs its own handling (config loading, store opening) exits 130
    like Ctrl-C instead of dying silently with -15."""
    import signal
    import threading

    from rocky_engine.run import interrupt

    if threading.current_thread() is not threading.main_thread():
        return
    interrupt.forget_early_signal()

    def _raise(signum: int, frame: object) -> None:
        # noted first: a KeyboardInterrupt raised where CPython discards it (a finalizer) still stops the
        # run when its guard is entered (run.interrupt.note_early_signal)
        interrupt.note_early_signal(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise)


def _log_level() -> int:
    import logging

    name = os.environ.get("ROCKY_LOG", "info").upper()
    level = logging.getLevelName(name)
    return level if isinstance(level, int) else logging.INFO


if __name__ == "__main__":
    main()
