"""A SIGTERM before the run's guard is entered stops the run even where its KeyboardInterrupt is lost.

The entry point's early SIGTERM handler raises ``KeyboardInterrupt``; CPython runs a pending handler at its
next check, and what it raises inside a finalizer (here: ``__del__`` of an object collected during start-up)
is printed as "Exception ignored" and discarded. Without a note of the signal the command would go on as if
never signalled, and a drain would wait for its SIGKILL. Real process, real signal, a real finalizer.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

CHILD = """
import json, os, signal
from rocky_engine.cli.main import _sigterm_as_interrupt
from rocky_engine.run.interrupt import InterruptGuard

_sigterm_as_interrupt()

class Closing:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(1000))  # the handler runs here, inside the finalizer, and its KeyboardInterrupt is lost

Closing()  # collected at once: the signal lands during start-up, before any guard
with InterruptGuard() as guard:
    print(json.dumps({"stop": guard.stop.is_set(), "signal": guard.signal_name}))
with InterruptGuard() as later:  # consumed once: a second guard of the same process starts clean
    print(json.dumps({"stop": later.stop.is_set()}))
"""


def test_a_sigterm_lost_in_a_finalizer_before_the_guard_still_stops_the_run() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "KeyboardInterrupt" in proc.stderr  # CPython's "Exception ignored in ... __del__": it was lost
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first == {"stop": True, "signal": "SIGTERM"}
    assert second == {"stop": False}


def test_a_sigterm_before_the_guard_that_propagates_still_exits_at_once() -> None:
    child = (
        "import os, signal, time\n"
        "from rocky_engine.cli.main import _sigterm_as_interrupt\n"
        "_sigterm_as_interrupt()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    # an uncaught KeyboardInterrupt ends CPython by SIGINT (the entry point turns it into 130): not the sleep
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in proc.stderr
