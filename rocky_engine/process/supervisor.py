"""The supervisor: a small program that sits between rocky and one child program.

It runs as a fork of rocky's fork server (``forkserver.py``: ``python -I -S``, no site-packages, no
``PYTHON*`` variables, standard library only), with the child's stdin/stdout/stderr as its own and two
pipes:

- **control** (fd given in argv, rocky holds the only write end): first one frame with the spec (argv, env,
  cwd, grace, death_grace, rlimits, remove_on_orphan), then one byte per command:
  ``S`` stop (SIGTERM, ``grace``, SIGKILL), ``K`` kill now. **EOF means rocky is gone** (exited or killed,
  even by ``kill -9``: the kernel closes its descriptors), whichever thread of rocky started us; the
  supervisor then stops the program with ``death_grace``.
- **status** (supervisor -> rocky): one frame per event: ``started`` (with the program's pid), ``error``
  (the program could not be started: errno, strerror, filename) and ``exit``.

A frame is a 4-byte big-endian length and a ``marshal``-ed dict: both ends are the same interpreter, and
``marshal`` is built in, where ``json`` would cost this start-up more than everything else it imports.

The supervisor is a child subreaper (``PR_SET_CHILD_SUBREAPER``, Linux): every process the program forks
stays under it even after its parent exits (a double fork, a wrapper script that does not ``exec``), so
"the program's processes" is the supervisor's whole subtree, not only the program's process group. A stop
sends SIGTERM (and SIGCONT, so a stopped process can act on it) to the program's group and to every
process of the subtree, waits up to the grace for the subtree to empty, then sends SIGKILL to the group and
the subtree until nothing is left. When the program exits on its own and leaves processes behind, they are
stopped the same way (``leftovers``): a child is finished when its program is, and nothing it started keeps
running. The supervisor ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT: a Ctrl-C or a ``kill`` aimed at
rocky's group is rocky's to handle; only rocky (or its death) stops the program.
"""

from __future__ import annotations

import _signal as signal  # the C module: ``signal`` wraps it in enums, and enum costs a start-up of its own
import marshal
import os
import select
import sys
import time

# Not ``typing.TYPE_CHECKING``: importing typing would double this program's start-up time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: prctl option (linux/prctl.h)
PR_SET_CHILD_SUBREAPER = 36
#: After SIGKILL, how long to wait for the subtree to disappear before reporting survivors.
KILL_WAIT_SECS = 5.0
IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Dispositions the program must get back: ignored ones survive exec, Python ignores SIGPIPE/SIGXFSZ, and
#: whoever started rocky (a CI runner, nohup, a service manager) may have ignored any other one. Every
#: signal Python can set is reset; glibc keeps 32 and 33 for itself and no program can change those.
_RESET = tuple(sig for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP))
#: ``prctl`` from libc, loaded once by :func:`warm_up` (the fork server) so each fork has it for free
_prctl: Any = None


def main(argv: list[str]) -> int:
    control, status = int(argv[0]), int(argv[1])
    for fd in (control, status):
        os.set_inheritable(fd, False)
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    subreaper = _become_subreaper()
    try:
        spec = _read_spec(control)
    except (OSError, ValueError):
        return 2  # rocky died before it sent the spec: nothing was started
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    try:
        pid = _spawn(spec)
    except OSError as exc:
        _report(status, {"event": "error", "errno": exc.errno, "strerror": exc.strerror or str(exc),
                         "filename": exc.filename})
        return 0
    _report(status, {"event": "started", "pid": pid, "supervisor": os.getpid()})
    # The program has our stdin/stdout/stderr; rocky must see EOF when the program's processes close them.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    watch = Watch(pid, spec, control, wake_r, subreaper)
    try:
        result = watch.run()
    except BaseException as exc:  # a bug here must not leave the program unsupervised: take it down
        watch._kill_all()
        result = {"returncode": watch.returncode, "stopped": watch.stop_requested, "leftovers": False,
                  "survivors": 0, "error": f"{type(exc).__name__}: {exc}"}
    _report(status, {"event": "exit", **result})
    return 0


def warm_up() -> None:
    """Load what each supervisor needs before the fork server forks it (``prctl``, ``resource``)."""
    global _prctl
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import resource  # noqa: F401 - imported here so the program's fork does not load it

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):
        _prctl = None


def _become_subreaper() -> bool:
    if _prctl is None:
        warm_up()
    return _prctl is not None and bool(_prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            raise ValueError("control pipe closed")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def frame(message: dict[str, Any]) -> bytes:
    data = marshal.dumps(message)
    return len(data).to_bytes(4, "big") + data


def _read_spec(control: int) -> dict[str, Any]:
    size = int.from_bytes(_read_exact(control, 4), "big")
    spec: dict[str, Any] = marshal.loads(_read_exact(control, size))
    return spec


def _report(status: int, message: dict[str, Any]) -> None:
    data = frame(message)
    try:
        while data:
            data = data[os.write(status, data):]
    except OSError:
        pass  # rocky is gone; the program is stopped all the same


def _spawn(spec: dict[str, Any]) -> int:
    """Fork the program in a new session; an exec failure comes back through a close-on-exec pipe."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked program until exec
        try:
            os.close(err_r)
            os.setsid()
            for sig in _RESET:
                signal.signal(sig, signal.SIG_DFL)
            if spec.get("cwd"):
                os.chdir(spec["cwd"])
            _apply_rlimits(spec.get("rlimits") or [])
            argv = spec["argv"]
            os.execvpe(argv[0], argv, spec["env"])
        except OSError as exc:
            name = exc.filename
            failure = {"errno": exc.errno, "strerror": exc.strerror or str(exc),
                       "filename": os.fsdecode(name) if isinstance(name, (str, bytes)) else None}
        except BaseException as exc:
            failure = {"errno": None, "strerror": f"{type(exc).__name__}: {exc}", "filename": None}
        try:
            os.write(err_w, marshal.dumps(failure))
        finally:
            os._exit(127)
    os.close(err_w)
    try:
        chunks = []
        while chunk := os.read(err_r, 65536):
            chunks.append(chunk)
    finally:
        os.close(err_r)
    if not chunks:
        return pid
    os.waitpid(pid, 0)
    failure = marshal.loads(b"".join(chunks))
    raise OSError(failure["errno"], failure["strerror"], failure["filename"])


def _apply_rlimits(limits: list[list[Any]]) -> None:  # pragma: no cover - runs in the forked program
    import resource

    for name, soft, hard, best_effort in limits:
        which = getattr(resource, name)
        _cur_soft, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard, soft = min(hard, cur_hard), min(soft, cur_hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError) as exc:
            if not best_effort:
                raise OSError(None, f"cannot set {name} to {soft}: {exc}") from None


def descendants(root: int) -> list[tuple[int, int]]:
    """Every live descendant of ``root`` as (pid, process group) (from ``/proc``; empty without it)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[tuple[int, int]]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue  # it exited meanwhile
        # "pid (comm) state ppid ...": comm may contain anything, so cut after its last ")"
        fields = data[data.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append((int(name), int(fields[2])))
    found: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child[0])
    return found


class Watch:
    """The supervision loop of one program (process group ``pid``)."""

    def __init__(self, pid: int, spec: dict[str, Any], control: int, wake: int, subreaper: bool) -> None:
        self.pid = pid
        self.spec = spec
        self.control = control
        self.wake = wake
        self.subreaper = subreaper
        self.returncode: int | None = None
        self.kill_at: float | None = None
        self.stop_requested = False
        self.orphaned = False
        self.leftovers = False

    def run(self) -> dict[str, Any]:
        poller = select.poll()
        poller.register(self.control, select.POLLIN)
        poller.register(self.wake, select.POLLIN)
        survivors = 0
        while True:
            alive = self._reap()
            if self.returncode is not None and not alive:
                break
            if self.returncode is not None and self.kill_at is None:
                self.leftovers = True
                self._begin_stop(float(self.spec["grace"]))
            now = time.monotonic()
            if self.kill_at is not None and now >= self.kill_at:
                survivors = self._kill_all()
                break
            timeout = None if self.kill_at is None else self.kill_at - now
            if not self.subreaper and self.returncode is not None:
                timeout = 0.1 if timeout is None else min(timeout, 0.1)  # orphans send no SIGCHLD here
            for fd, _event in poller.poll(None if timeout is None else max(1, int(timeout * 1000) + 1)):
                if fd == self.wake:
                    drain(self.wake)
                elif fd == self.control:
                    self._command(poller)
        removed = None
        if self.orphaned and self.spec.get("remove_on_orphan"):
            removed = _remove(self.spec["remove_on_orphan"])
        return {
            "returncode": self.returncode, "stopped": self.stop_requested, "orphaned": self.orphaned,
            "leftovers": self.leftovers, "survivors": survivors, "removed": removed,
        }

    def _command(self, poller: select.poll) -> None:
        try:
            data = os.read(self.control, 64)
        except BlockingIOError:
            return
        if not data:
            poller.unregister(self.control)
            self.orphaned = True
            self._begin_stop(float(self.spec["death_grace"]))
            return
        for byte in data:
            if byte in b"SK":
                self.stop_requested = True
                self._begin_stop(0.0 if byte == ord("K") else float(self.spec["grace"]))

    def _reap(self) -> bool:
        """Reap every exited child; True while a process of the program is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return not self.subreaper and self._group_alive()
            if pid == 0:
                return True
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _begin_stop(self, grace: float) -> None:
        now = time.monotonic()
        if self.kill_at is not None:
            self.kill_at = min(self.kill_at, now + grace)
            return
        self.kill_at = now + grace
        self._signal_all(signal.SIGTERM)
        self._signal_all(signal.SIGCONT)

    def _signal_all(self, sig: int) -> None:
        # The group id is safe to signal while its leader is unreaped (its pid cannot be reused); after
        # that every process left is in our subtree (subreaper), signalled one by one. Each process gets
        # the signal once: a second SIGTERM could land while a program's own handler is shutting it down.
        grouped = self.returncode is None or not self.subreaper
        if grouped:
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid, pgid in descendants(os.getpid()):
            if grouped and pgid == self.pid:
                continue
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_all(self) -> int:
        """SIGKILL the group and the subtree until nothing is left; the number of survivors."""
        deadline = time.monotonic() + KILL_WAIT_SECS
        while True:
            self._signal_all(signal.SIGKILL)
            if not self._reap():
                return 0
            if time.monotonic() >= deadline:
                return len(descendants(os.getpid())) or 1
            select.select([self.wake], [], [], 0.02)
            drain(self.wake)


def drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _remove(path: str) -> bool:
    try:
        from rocky_engine.process.removal import remove_tree
    except ImportError:  # run as the supervisor program: only this directory is on sys.path
        from removal import remove_tree  # type: ignore[no-redef]
    return remove_tree(path)


