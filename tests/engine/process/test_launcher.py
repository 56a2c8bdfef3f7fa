"""The launcher with real processes: what a child gets, output lines, timeout, stop (from a thread, a signal
handler, stop_all), leftovers, a lost supervisor. Every wait on a child is a handshake: the program prints
"ready" (or writes a file) after it installed its signal handlers and forked what it forks."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocky_engine.process import Child, Launch, Rlimit, live_children, run, start, stop_all
from tests.engine.process.kit import alive, dead, descendants, pids_in, wait_for_file

PY = sys.executable

REPORT = """
import json, os, sys
data = sys.stdin.read()
fds = []
for fd in range(3, 256):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
print(json.dumps({"stdin": data, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(),
                  "pgid": os.getpgid(0), "sid": os.getsid(0), "fds": fds}))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""

#: A program that reports SIGTERM, forks a grandchild ignoring it, says ready, and never exits.
STUBBORN = """
import os, signal, sys, time
log = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *a: open(log, "a").write("term\\n"))
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
open(log, "a").write(f"grandchild {pid}\\n")
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

#: Exits 130 by itself on SIGTERM, taken with ``sigtimedwait`` (blocked before "ready"): a raising handler
#: can lose it (a signal caught just before ``time.sleep`` enters its syscall does not cut the sleep
#: short; one handled inside a finalizer has its SystemExit discarded, see tests/engine/schedule).
POLITE = """
import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
print("ready", flush=True)
sys.exit(130 if signal.sigtimedwait({signal.SIGTERM}, 600) else 0)
"""

#: Test programs that report a pid: ``note(NAME)`` writes the caller's pid to ``argv[1]/NAME`` atomically.
NOTE = """
import os, signal, sys, time
out = sys.argv[1]
def note(name):
    with open(os.path.join(out, name + ".partial"), "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(os.path.join(out, name + ".partial"), os.path.join(out, name))
"""

#: Exits at once, leaving a worker in its group that ignores SIGTERM and a setsid'd, double-forked daemon
#: (each writes its pid into the directory argv[1]).
LEAVES = NOTE + """
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("worker")
    while True:
        time.sleep(1)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note("daemon")
        while True:
            time.sleep(1)
    os._exit(0)
while len(os.listdir(out)) < 2 or any(n.endswith(".partial") for n in os.listdir(out)):
    time.sleep(0.01)
"""


def script(tmp_path: Path, text: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


class Ready:
    """A stdout sink that collects lines and sets ``event`` on the line "ready"."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.event = threading.Event()

    def __call__(self, line: bytes) -> None:
        self.lines.append(line)
        if line.strip() == b"ready":
            self.event.set()


def jumping_clock(trigger: Callable[[], bool], jump: float = 10_000.0) -> Callable[[], float]:
    """Real monotonic time, ``jump`` seconds ahead once ``trigger()`` holds: a timeout then fires at a
    known point of the program (after its handshake), whatever the load of the machine."""
    return lambda: time.monotonic() + (jump if trigger() else 0.0)


def test_the_program_gets_its_stdin_env_cwd_and_a_session_of_its_own(tmp_path: Path) -> None:
    out: list[bytes] = []
    err: list[bytes] = []
    env = {"PATH": os.environ["PATH"], "ONLY": "this"}
    result = run(Launch(argv=[PY, "-c", REPORT], cwd=tmp_path, env=env, stdin=b"the request\n",
                        stdout=out.append, stderr=err.append))
    seen = json.loads(out[0])
    assert result.returncode == 3 and result.exit_code == 3 and not result.timed_out and not result.stopped
    assert seen["stdin"] == "the request\n" and seen["cwd"] == str(tmp_path)
    assert seen["env"]["ONLY"] == "this"
    assert seen["pid"] == result.pid == seen["pgid"] == seen["sid"] != os.getsid(0)
    assert seen["fds"] == []  # neither the supervisor's pipes nor anything of rocky's leak into it
    assert err == [b"to stderr\n"]
    assert live_children() == []


def test_the_environment_is_exactly_the_one_given(tmp_path: Path) -> None:
    out: list[bytes] = []
    env = {"PATH": os.environ["PATH"], "ONLY": "this"}
    run(Launch(argv=["env", "-0"], env=env, stdout=out.append))
    # nothing added by the supervisor's interpreter (no LC_CTYPE from Python's locale coercion)
    assert b"".join(out).split(b"\0")[:-1] == [b"PATH=" + env["PATH"].encode(), b"ONLY=this"]


def test_signals_are_back_to_their_defaults_and_rlimits_are_set(tmp_path: Path) -> None:
    out: list[bytes] = []
    limits = (Rlimit("RLIMIT_FSIZE", 123456, 123456), Rlimit("RLIMIT_CPU", 30, 35))
    # whoever started the tests may ignore signals too (a CI runner ignores some): rocky ignoring SIGUSR2
    # and SIGRTMIN here stands for that, and the program must get them back as well
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGUSR2, signal.SIGRTMIN)}
    try:
        run(Launch(argv=["sh", "-c", "grep -E '^Sig(Ign|Blk):' /proc/self/status; ulimit -f; ulimit -t"],
                   rlimits=limits, stdout=out.append))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # the supervisor ignores SIGINT/SIGTERM/SIGHUP/SIGQUIT and Python ignores SIGPIPE/SIGXFSZ: none of it
    # reaches the program. glibc reserves signals 32 and 33 (no program can set them), so an ignore
    # inherited from the parent there is out of anyone's hands and not compared.
    settable = sum(1 << (sig - 1) for sig in signal.valid_signals() if sig <= 64)
    masks = dict(line.split(b":\t") for line in out[:2])
    assert int(masks[b"SigBlk"], 16) == 0
    assert int(masks[b"SigIgn"], 16) & settable == 0
    assert out[2:] == [b"241\n", b"30\n"]  # ulimit -f counts 512-byte blocks


def test_a_program_that_cannot_start_raises_like_subprocess(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:  # with every kind of stream rocky keeps an end of
        start(Launch(argv=[str(tmp_path / "missing")], stdin=b"x", stdout=print, stderr=print))
    assert missing.value.filename == str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        start(Launch(argv=["true"], cwd=tmp_path / "no-such-dir"))
    with pytest.raises(FileNotFoundError):
        start(Launch(argv=["no-such-program-on-path"], env={"PATH": str(tmp_path)}))
    with pytest.raises(OSError, match="cannot set RLIMIT_CPU"):
        start(Launch(argv=["true"], rlimits=(Rlimit("RLIMIT_CPU", 10, 5),)))
    assert live_children() == []


def test_stdout_to_a_file_and_long_lines_in_pieces(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "wb") as fh:
        assert run(Launch(argv=["sh", "-c", "echo captured"], stdout=fh)).returncode == 0
    assert (tmp_path / "out.txt").read_text() == "captured\n"
    pieces: list[bytes] = []
    run(Launch(argv=["sh", "-c", "printf 'abcdefghijKLM\\nxy'"], stdout=pieces.append, max_line_bytes=5))
    assert pieces == [b"abcde", b"fghij", b"KLM\n", b"xy"]


def test_a_big_stdin_that_the_program_never_reads_does_not_block(tmp_path: Path) -> None:
    result = run(Launch(argv=["true"], stdin=b"x" * 5_000_000))
    assert result.returncode == 0


@pytest.mark.slow
def test_timeout_sends_sigterm_to_the_group_then_sigkill_after_the_grace(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    ready = Ready()
    child = start(
        Launch(argv=[PY, script(tmp_path, STUBBORN), str(log)], stdout=ready, timeout=100, grace=1.0),
        clock=jumping_clock(ready.event.is_set),
    )
    lines = wait_for_file(log).splitlines()
    grandchild = next(int(line.split()[1]) for line in lines if "grandchild" in line)
    tree = descendants(os.getpid())
    result = child.wait()
    assert result.timed_out and not result.stopped
    assert result.returncode == -signal.SIGKILL and result.exit_code == 137  # SIGTERM was ignored
    assert "term" in log.read_text().splitlines()
    # the grace is behaviour: SIGKILL came no earlier than 1 s after the SIGTERM
    assert result.duration >= 10_000 + 1.0
    # the supervisor reported only once every process of the program was gone
    assert not alive(p for p in tree if p.pid == grandchild)


def test_stop_from_another_thread(tmp_path: Path) -> None:
    ready = Ready()
    child = start(Launch(argv=[PY, script(tmp_path, POLITE)], stdout=ready, grace=30))
    stopper = threading.Thread(target=lambda: (ready.event.wait(60), child.stop()))
    stopper.start()
    result = child.wait()
    stopper.join()
    assert result.stopped and not result.timed_out and result.returncode == 130


def test_stop_from_a_signal_handler(tmp_path: Path) -> None:
    ready = Ready()
    child = start(Launch(argv=[PY, script(tmp_path, POLITE)], stdout=ready, grace=30))
    previous = signal.signal(signal.SIGUSR1, lambda *_: child.stop())
    try:
        # the handler runs in this (main) thread while it pumps the child in wait()
        threading.Thread(target=lambda: (ready.event.wait(60), os.kill(os.getpid(), signal.SIGUSR1))).start()
        result = child.wait()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert result.stopped and result.returncode == 130


def test_stop_now_does_not_wait_for_the_grace(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    ready = Ready()
    child = start(Launch(argv=[PY, script(tmp_path, STUBBORN), str(log)], stdout=ready, grace=600))
    while not ready.event.is_set():
        assert child.poll_for(0.05) is None
    child.stop(now=True)
    result = child.wait()
    assert result.returncode == -signal.SIGKILL and result.stopped


def test_stop_all_stops_every_live_child(tmp_path: Path) -> None:
    sinks = [Ready(), Ready()]
    children = [start(Launch(argv=[PY, script(tmp_path, POLITE)], stdout=sink)) for sink in sinks]
    assert set(live_children()) == set(children)
    for child, sink in zip(children, sinks, strict=True):
        while not sink.event.is_set():
            assert child.poll_for(0.05) is None
    stop_all()
    results = [child.wait() for child in children]
    assert [(r.stopped, r.returncode) for r in results] == [(True, 130), (True, 130)]
    assert live_children() == []


def test_processes_left_behind_are_stopped_inside_and_outside_the_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    result = run(Launch(argv=[PY, script(tmp_path, LEAVES), str(pids)], grace=0.5))
    assert result.returncode == 0 and result.leftovers
    worker, daemon = int((pids / "worker").read_text()), int((pids / "daemon").read_text())
    # gone before wait() returned: the worker after its grace (it ignores SIGTERM), the daemon although it
    # left the group with setsid and was re-parented by a double fork (the supervisor is its subreaper)
    assert dead(worker) and dead(daemon)


def test_a_killed_supervisor_takes_the_program_group_down(tmp_path: Path) -> None:
    ready = Ready()
    child: Child = start(Launch(argv=[PY, script(tmp_path, POLITE)], stdout=ready))
    while not ready.event.is_set():
        assert child.poll_for(0.05) is None
    program = [p for p in descendants(os.getpid()) if p.pid == child.pid]
    os.kill(child.supervisor_pid, signal.SIGKILL)
    result = child.wait()
    assert result.returncode is None and result.exit_code == 137
    deadline = time.monotonic() + 10
    while alive(program) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(program)


DRIVER = """
import os, sys, threading, time
from rocky_engine.process import Launch, start
prog, pids, scratch, done = sys.argv[1:5]
box = {}
def spawn():
    box["child"] = start(Launch(argv=[sys.executable, prog, pids], remove_on_orphan=scratch))
t = threading.Thread(target=spawn)
t.start()
t.join()  # the thread that forked the supervisor is gone: PR_SET_PDEATHSIG would fire now
open(done, "w").write("thread gone")
while True:
    time.sleep(1)
"""

#: The program of the driver: two workers (one ignoring SIGTERM, one setsid'd) and itself, all writing.
WORKERS = NOTE + """
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("stubborn")
    while True:
        time.sleep(1)
if os.fork() == 0:
    os.setsid()
    note("escaped")
    while True:
        time.sleep(1)
note("program")
while True:
    time.sleep(1)
"""


@pytest.mark.slow
def test_kill_9_of_rocky_takes_every_descendant_with_it_whichever_thread_started_them(tmp_path: Path) -> None:
    import subprocess

    pids, scratch = tmp_path / "pids", tmp_path / "scratch"
    pids.mkdir()
    scratch.mkdir()
    (scratch / "partial-output").write_text("x")
    done = tmp_path / "thread-gone"
    program = script(tmp_path, WORKERS)
    rocky = subprocess.Popen([PY, "-c", DRIVER, program, str(pids), str(scratch), str(done)])
    try:
        wait_for_file(done)
        for name in ("program", "stubborn", "escaped"):
            wait_for_file(pids / name)
        tree = descendants(rocky.pid)
        started = set(pids_in(pids))
        assert started <= {p.pid for p in alive(tree)}  # alive although the starting thread has ended
        rocky.kill()
        rocky.wait()
        t_dead = time.monotonic()
        left = tree
        while (left := alive(left)) and time.monotonic() < t_dead + 2.0:
            time.sleep(0.02)
        assert left == [], f"alive 2 s after rocky died: {left}"
        assert not scratch.exists()  # removed by the supervisor once the program's processes were gone
    finally:
        if rocky.poll() is None:
            rocky.kill()
            rocky.wait()


def test_a_failing_line_callback_stops_the_program_and_is_raised(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def sink(line: bytes) -> None:
        raise RuntimeError("the log is broken")

    child = start(Launch(argv=["sh", "-c", f"echo $$ > {pids}; echo hello; exec sleep 300"], stdout=sink))
    with pytest.raises(RuntimeError, match="the log is broken"):
        child.wait()
    assert dead(int(pids.read_text())) and live_children() == []


def test_no_descriptor_leaks_from_starts_that_work_or_fail(tmp_path: Path) -> None:
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    run(Launch(argv=["true"]))  # the fork server's socket and lifeline stay open: counted from here
    before = fds()
    for _ in range(10):
        run(Launch(argv=["sh", "-c", "cat; echo out; echo err >&2"], stdin=b"in", stdout=lambda _: None,
                   stderr=lambda _: None))
        with pytest.raises(FileNotFoundError):
            start(Launch(argv=[str(tmp_path / "missing")], stdin=b"x", stdout=print, stderr=print))
    assert fds() == before


def test_a_killed_fork_server_is_replaced_and_its_supervisors_go_on(tmp_path: Path) -> None:
    from rocky_engine.process.forkserver_client import FORK_SERVER

    ready = Ready()
    child = start(Launch(argv=[PY, script(tmp_path, POLITE)], stdout=ready))
    while not ready.event.is_set():
        assert child.poll_for(0.05) is None
    old = FORK_SERVER.pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not dead(old) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert run(Launch(argv=["true"])).returncode == 0  # a new server started it
    assert FORK_SERVER.pid not in (None, old)
    child.stop()
    assert child.wait().returncode == 130  # its supervisor did not need the old server



# A subreaper stands in for whoever waits for rocky: a fork server left running when rocky exits would be
# re-parented to it, and waitpid() would find it among the harness's children.
_FORK_SERVER_HARNESS = """
import ctypes, os, subprocess, sys
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
owner = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE)
server_pid = int(owner.stdout.readline())
assert owner.wait() == 0
try:
    os.waitpid(server_pid, 0)
    print("orphaned")
except ChildProcessError:
    print("reaped by its owner")
"""
_FORK_SERVER_OWNER = """
from rocky_engine.process import Launch, run
from rocky_engine.process.forkserver_client import FORK_SERVER
run(Launch(argv=["true"]))
print(FORK_SERVER.pid, flush=True)
"""


def test_the_fork_server_is_gone_when_rocky_exits() -> None:
    # Whoever waits for rocky (a test, a service manager) must find none of its processes left the moment
    # it has exited: the fork server is stopped and reaped at exit, not left to notice the lifeline's EOF.
    import subprocess

    out = subprocess.run([sys.executable, "-c", _FORK_SERVER_HARNESS, _FORK_SERVER_OWNER],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "reaped by its owner"
