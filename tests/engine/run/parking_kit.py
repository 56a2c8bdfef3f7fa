"""A hook that parks a run inside one model's (or table's) before-hooks, and the signal sent once it has.

The handshake for "a signal comes while that model's before-hooks run": the hook writes a file
atomically and waits; the test sends the signal only once the file exists.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

#: for the model (or table) named in argv[2], writes argv[1] (atomically) and then waits
PARKING_HOOK = textwrap.dedent(
    """
    import json, os, sys, time
    event = json.load(sys.stdin)
    if sys.argv[2] in (event.get("model"), event.get("table")):
        with open(sys.argv[1] + ".partial", "w") as f:
            f.write(str(os.getpid()))
        os.replace(sys.argv[1] + ".partial", sys.argv[1])
        time.sleep(300)
    """
)


def parking_hook(root: Path, event: str, name: str) -> tuple[str, Path]:
    """The ``[[hook.on_EVENT]]`` text of :data:`PARKING_HOOK` for ``name``, and the file it writes."""
    script, ready = root / "park.py", root / "parked"
    script.write_text(PARKING_HOOK)
    command = f"{sys.executable} {script} {ready} {name}"
    return f"\n[[hook.on_{event}]]\ncommand = '{command}'\ntimeout_ms = 600000\n", ready


def signal_when_parked(
    proc: subprocess.Popen[str], ready: Path, sig: signal.Signals, what: str
) -> tuple[str, str]:
    """Send ``sig`` to ``proc`` once the parking hook wrote ``ready``; its (stdout, stderr) at exit."""
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # the handshake file, polled: the hook gives no other signal
            assert proc.poll() is None and time.monotonic() < deadline, f"{what}'s hook never ran"
            time.sleep(0.01)
        proc.send_signal(sig)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
