"""The code location: everything under ``defs/`` (the Rocky component and the Python definitions).

Start it with ``make demo-dagster`` (``dagster dev`` on this file), or check it with
``dagster definitions validate -f examples/dagster/rocky_example/definitions.py``.
"""

import sys
from pathlib import Path

import dagster as dg

PROJECT = Path(__file__).resolve().parent.parent


@dg.definitions
def defs() -> dg.Definitions:
    # The example is not pip-installed: make `rocky_example` importable however dagster was started
    # (done here, at load time, because dagster restores sys.path after importing this file).
    if str(PROJECT) not in sys.path:
        sys.path.insert(0, str(PROJECT))
    return dg.load_from_defs_folder(path_within_project=PROJECT)
