"""The judge's side of the sandbox: start the zygote, open jobs, talk to a job, end it.

One ``Sandbox`` owns one zygote process (``python -m sandbox.zygote``, scrubbed environment) and
can run many jobs at once. A ``Job`` is one forked child holding one submission: requests go over
its own socket with per-call and per-job deadlines; its stdout/stderr are drained into a capped
buffer and never parsed; its end is known from the zygote's exit report, not from EOF.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from judge.errors import SandboxError, SubmissionFailure
from judge.exercise import Limits
from sandbox import wire

log = logging.getLogger("judge.sandbox")
REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT_CAP = 64 << 10  # bytes of a submission's stdout/stderr kept
SPIN_SECONDS = 0.0005  # how long to poll for a reply before sleeping
SANDBOX_UID = 65534
_ENV_PASSTHROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


SCRATCH_BYTES = 64 << 20  # the scratch tmpfs of one job (as root)
_libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2


def _mount_tmpfs(path: Path, size: int, uid: int) -> None:
    opts = f"size={size},nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", ctypes.c_ulong(0x2 | 0x8 | 0x4), opts) != 0:
        e = ctypes.get_errno()  # MS_NOSUID | MS_NOEXEC | MS_NODEV
        raise SandboxError(f"could not mount the scratch tmpfs at {path}: {os.strerror(e)}")


def _wipe(path: Path) -> None:
    """Unmount the scratch tmpfs (as root) or remove the scratch dir without following links."""
    if os.path.ismount(path):
        _libc.umount2(str(path).encode(), MNT_DETACH)
        try:
            path.rmdir()
        except OSError:
            pass
    else:  # rmtree is fd-based with O_NOFOLLOW on Linux: a planted link is removed, not followed
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Resources:
    cpu_ms: float = 0.0  # CPU time of the sandboxed process
    maxrss_kb: int = 0  # its peak resident memory (shared pages of the zygote included)
    wall_ms: float = 0.0  # wall time from fork to exit


@dataclass
class _Exit:
    status: int
    signal: int
    cpu_ms: float
    maxrss_kb: int
    oom: bool = False  # killed by its cgroup's OOM killer


class Sandbox:
    """A warm zygote and the jobs forked from it."""

    def __init__(self, scratch_root: str | None = None, start_timeout: float = 60.0,
                 require_isolation: bool = False, spares: bool = False):
        """``require_isolation``: refuse to run when Landlock or seccomp is missing (the service
        does; ``judge local`` only warns). ``spares``: keep one locked-down child forked ahead
        (the service's workers do; it takes the fork and lockdown off each verdict's path)."""
        self.spares = spares
        self.spin_seconds = SPIN_SECONDS  # how long both sides poll before sleeping (0: never)
        self._spare: dict[tuple, _Spare] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self.info: dict = {}
        self.root = os.geteuid() == 0
        base = scratch_root or os.environ.get("JUDGE_SCRATCH_DIR") or tempfile.gettempdir()
        self.scratch_root = Path(tempfile.mkdtemp(prefix="judge-scratch-", dir=base))
        os.chmod(self.scratch_root, 0o711)
        self._ready = threading.Event()
        # Closed jobs are reaped and wiped by one long-lived thread: starting a thread per job
        # costs milliseconds on a busy machine, on the verdict's path.
        self._finish_q: queue.Queue = queue.Queue()
        threading.Thread(target=self._finish_loop, name="job-finisher", daemon=True).start()
        self._background: queue.Queue = queue.Queue()  # spare children to fork
        threading.Thread(target=self._background_loop, name="spare-forker", daemon=True).start()
        self._start(start_timeout)
        if self.weaknesses:
            if require_isolation:
                self.close()
                raise SandboxError("refusing to run untrusted code without " + " and ".join(
                    self.weaknesses) + "; set JUDGE_ALLOW_WEAK_SANDBOX=1 (judge serve "
                    "--allow-weak-sandbox) to accept the risk")
            log.warning("the sandbox runs without %s", " and ".join(self.weaknesses))

    @property
    def weaknesses(self) -> list[str]:
        """The isolation layers this machine cannot provide (empty when all are in force)."""
        out = []
        if not self.info.get("landlock_abi"):
            out.append("Landlock (filesystem, network and signal confinement)")
        if not self.info.get("seccomp"):
            out.append("seccomp (the syscall deny-list: pyseccomp and libseccomp)")
        return out

    # --- the zygote ------------------------------------------------------------------------
    def _start(self, timeout: float) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": str(REPO_ROOT),
               "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        env.update({k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, cwd="/", stdin=subprocess.DEVNULL,
            start_new_session=True)
        theirs.close()
        self.ctrl = mine
        self._reader = threading.Thread(target=self._read_ctrl, name="zygote-ctrl", daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout):
            self.close()
            raise SandboxError("the sandbox zygote did not start in time")

    def _read_ctrl(self) -> None:
        while True:
            try:
                data = self.ctrl.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            ev = msg.get("event")
            if ev == "ready":
                self.info = msg
                self._ready.set()
                continue
            job = self._jobs.get(str(msg.get("id")))
            if job is not None:
                job._event(msg)
        self.alive = False
        for job in list(self._jobs.values()):
            job._event({"event": "exited", "status": -9, "signal": 9, "cpu_ms": 0, "maxrss_kb": 0,
                        "zygote_gone": True})

    alive = True

    def close(self) -> None:
        self.spares = False
        for spare in list(self._spare.values()):
            spare.ready.wait(5.0)
        self._background.put(None)
        for job in list(self._jobs.values()):
            job.kill()
        self.drain()
        self._finish_q.put(None)
        try:
            self.ctrl.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.scratch_root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- jobs ------------------------------------------------------------------------------
    def open_job(self, limits: Limits) -> "Job":
        """A locked-down child ready to load a submission. With ``spares``, one was forked and
        locked down in advance (when the previous job closed) and is handed out now."""
        if not self.alive:
            raise SandboxError("the sandbox zygote has stopped")
        if not self.spares:
            return self._open(limits)
        key = (limits.cpu_seconds, limits.memory_mb)
        with self._lock:
            spare = self._spare.pop(key, None)
        job = spare.take() if spare is not None else None
        if job is None:
            job = self._open(limits)
        # The next spare is forked when this job closes: forking and locking it down now would
        # take a core from this grading.
        job.spare_key = key
        job.limits = limits
        job.started_at = time.monotonic()
        job.deadline = job.started_at + limits.total_seconds
        return job

    def _open(self, limits: Limits) -> "Job":
        job_id = f"j{next(self._ids)}"
        scratch = self.scratch_root / job_id
        scratch.mkdir(mode=0o700)
        if self.root:  # a size-limited tmpfs: wiped by unmounting, never by rm as root
            _mount_tmpfs(scratch, SCRATCH_BYTES, SANDBOX_UID)
        host_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        job = Job(self, job_id, host_sock, out_r, scratch, limits)
        self._jobs[job_id] = job
        req = {"op": "start", "id": job_id, "scratch": str(scratch),
               "limits": {"cpu_seconds": int(limits.cpu_seconds), "memory_mb": int(limits.memory_mb)}}
        try:
            with self._lock:
                socket.send_fds(self.ctrl, [json.dumps(req).encode()], [child_sock.fileno(), out_w])
        except OSError as e:
            self._jobs.pop(job_id, None)
            raise SandboxError(f"could not reach the sandbox zygote: {e}") from e
        finally:
            child_sock.close()
            os.close(out_w)
        job._wait_hello()
        return job

    def _kill(self, job_id: str) -> None:
        try:
            with self._lock:
                self.ctrl.send(json.dumps({"op": "kill", "id": job_id}).encode())
        except OSError:
            pass

    def _forget(self, job: "Job") -> None:
        self._jobs.pop(job.id, None)

    def _finish_later(self, job: "Job") -> None:
        self._finish_q.put(job)
        key = job.spare_key
        if key is not None and self.spares and self.alive:
            with self._lock:
                if key not in self._spare:
                    self._spare[key] = _Spare(self, job.limits)

    def _finish_loop(self) -> None:
        while True:
            job = self._finish_q.get()
            try:
                if job is None:
                    return
                job._finish()
            except Exception:  # noqa: BLE001 - one job's clean-up must not stop the others'
                log.exception("could not clean up job %s", getattr(job, "id", "?"))
            finally:
                self._finish_q.task_done()

    def _background_loop(self) -> None:
        while True:
            task = self._background.get()
            if task is None:
                return
            try:
                task()
            except Exception:  # noqa: BLE001 - the next spare is tried anyway
                log.exception("could not prepare a spare sandbox")

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until every closed job has been reaped and wiped."""
        deadline = time.monotonic() + timeout
        while self._finish_q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)


class _Spare:
    """A child being forked and locked down ahead of need, by the sandbox's background thread."""

    def __init__(self, box: Sandbox, limits: Limits):
        self.job: Job | None = None
        self.ready = threading.Event()
        box._background.put(lambda: self._open(box, limits))

    def _open(self, box: Sandbox, limits: Limits) -> None:
        try:
            self.job = box._open(limits)
        except (SandboxError, SubmissionFailure) as e:
            log.warning("could not fork a spare sandbox: %s", e)
        finally:
            self.ready.set()

    def take(self) -> "Job | None":
        self.ready.wait(30.0)
        job = self.job
        if job is None or job._exited.is_set():
            return None
        return job


class Job:
    """One sandboxed child holding one submission."""

    def __init__(self, box: Sandbox, job_id: str, sock: socket.socket, out_r: int, scratch: Path,
                 limits: Limits):
        self.box, self.id, self.sock, self.scratch, self.limits = box, job_id, sock, scratch, limits
        self.layers: list[str] = []
        self.missing_layers: list[str] = []
        self.pid = 0
        self.started_at = time.monotonic()
        self.deadline = self.started_at + limits.total_seconds
        self._sent_at = self.started_at  # when the last request went out
        self._ru: list = [0.0, 0]  # (cpu ms, peak RSS kB) the child reported with its last answer
        self.spare_key: tuple | None = None  # with spares: the next one is forked when this closes
        self._exited = threading.Event()
        self._exit: _Exit | None = None
        self._output = bytearray()
        self._output_dropped = 0
        os.set_blocking(out_r, False)
        self._out_fd = out_r  # drained while we wait for replies; no thread
        self.closed = False

    # --- events from the zygote ------------------------------------------------------------
    def _event(self, msg: dict) -> None:
        ev = msg.get("event")
        if ev == "started":
            self.pid = int(msg.get("pid", 0))
        elif ev in ("exited", "failed"):
            self._exit = _Exit(int(msg.get("status", -1)), int(msg.get("signal", 0)),
                               float(msg.get("cpu_ms", 0)), int(msg.get("maxrss_kb", 0)),
                               bool(msg.get("oom", False)))
            self._exited.set()
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # wakes a request waiting on this socket
            except OSError:
                pass

    def _drain(self) -> None:
        """Read what the child has written so far, keeping at most OUTPUT_CAP bytes."""
        while self._out_fd >= 0:
            try:
                chunk = os.read(self._out_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:  # the child (and anything it left) is gone
                os.close(self._out_fd)
                self._out_fd = -1
                return
            room = max(OUTPUT_CAP - len(self._output), 0)
            self._output += chunk[:room]
            self._output_dropped += len(chunk) - len(chunk[:room])

    @property
    def output(self) -> str:
        text = self._output.decode("utf-8", "replace")
        if self._output_dropped:
            text += f"\n[… {self._output_dropped} more bytes of output dropped]"
        return text

    # --- requests --------------------------------------------------------------------------
    def _wait_hello(self) -> None:
        header, _ = self._receive(min(30.0, self.limits.total_seconds), during="start-up")
        self.layers = list(header.get("layers", []))
        self.missing_layers = list(header.get("missing", []))

    def request(self, header: dict, blobs: list[bytes] = (), *, during: str) -> wire.Message:
        """Send one request and wait for its reply within the call and job deadlines."""
        self.send(header, blobs, during=during)
        return self.reply(during=during)

    def send(self, header: dict, blobs: list[bytes] = (), *, during: str,
             drain: Callable[[], bool] | None = None) -> None:
        """Send a request without waiting for its answer (``reply`` reads answers in order).

        ``drain``, for requests sent while earlier answers are unread: called when the child's
        input is full, it reads one owed answer (False: none is owed, so wait for room).
        """
        if self.closed:
            raise SubmissionFailure("runtime_error", "the submission's process has already ended")
        try:
            if drain is None:
                wire.send(self.sock, header, blobs)
            else:
                self._send_draining(wire.frame(header, blobs), drain, during)
        except OSError:
            self._fail(during)
        self._sent_at = time.monotonic()

    def _send_draining(self, data: bytes, drain: Callable[[], bool], during: str) -> None:
        view = memoryview(data)
        while view:
            self.sock.setblocking(False)  # reading an answer sets a timeout: undo it each time
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                if not drain() and not select.select([], [self.sock], [],
                                                     max(self.deadline - time.monotonic(), 0))[1]:
                    self.kill()
                    raise SubmissionFailure("time_limit", f"{during} ran past the exercise's total "
                                            f"limit ({self.limits.total_seconds:g} s)") from None

    def reply(self, *, during: str, since: float | None = None) -> wire.Message:
        """The next answer, due within a call's limit of ``since`` (by default, when the last
        request went out) and within the job's limit."""
        reply, payload = self._receive(self.limits.call_seconds, during=during,
                                       since=self._sent_at if since is None else since)
        ru = reply.get("ru")
        if type(ru) is list and len(ru) == 2:  # its own (informational) resource use so far
            self._ru = ru
        try:
            return wire.Message(reply, payload)
        except wire.WireError as e:
            self.kill()
            raise SubmissionFailure("runtime_error", f"the submission's process sent a malformed "
                                    f"reply during {during}: {e}") from None

    def _receive(self, call_seconds: float, *, during: str,
                 since: float | None = None) -> tuple[dict, bytearray]:
        deadline = min((since or time.monotonic()) + call_seconds, self.deadline)
        wire.spin_until_readable(self.sock, self.box.spin_seconds)  # most replies come within µs
        while True:  # wait for the reply, draining the child's output meanwhile
            remaining = deadline - time.monotonic()
            waiting = [self.sock] + ([self._out_fd] if self._out_fd >= 0 else [])
            ready = select.select(waiting, [], [], remaining)[0] if remaining > 0 else []
            if self._out_fd in ready:
                self._drain()
            if self.sock in ready or not ready:
                break
        if not ready:
            self.kill()
            which = "its call limit" if deadline < self.deadline else "the exercise's total limit"
            raise SubmissionFailure("time_limit", f"{during} ran past {which} "
                                    f"({call_seconds:g} s per call, {self.limits.total_seconds:g} s in all)")
        # The reply is complete once its first byte is here, unless the child dies mid-frame.
        self.sock.settimeout(max(deadline - time.monotonic(), 0.1))
        try:
            return wire.recv(self.sock)
        except (EOFError, OSError, wire.WireError):
            self._fail(during)

    def _fail(self, during: str):
        """The child is gone (or talking nonsense): say why, in the submission's terms."""
        self.kill()
        self._exited.wait(3.0)
        ex = self._exit
        if ex is None:
            raise SubmissionFailure("runtime_error", f"the submission's process stopped answering during {during}")
        if ex.signal == signal.SIGKILL and ex.cpu_ms >= self.limits.cpu_seconds * 1000 * 0.95 \
                or ex.signal == signal.SIGXCPU:
            raise SubmissionFailure("time_limit", f"CPU time limit ({self.limits.cpu_seconds} s) "
                                    f"exceeded during {during}")
        if ex.signal == signal.SIGKILL:
            if ex.oom:
                raise SubmissionFailure("memory_limit", f"memory limit ({self.limits.memory_mb} MB) "
                                        f"exceeded during {during}")
            raise SubmissionFailure("runtime_error", f"the submission's process was killed during {during}")
        if ex.signal:
            raise SubmissionFailure("runtime_error", f"the submission's process died of signal "
                                    f"{signal.Signals(ex.signal).name} during {during}")
        raise SubmissionFailure("runtime_error", f"the submission's process exited (status "
                                f"{ex.status}) during {during}; calling exit() is not allowed")

    # --- the end ---------------------------------------------------------------------------
    def kill(self) -> None:
        if not self._exited.is_set():
            self.box._kill(self.id)

    def close(self) -> Resources:
        """End the child and report its resource use; the rest of the clean-up (waiting for the
        zygote's exit report, killing a child that lingers, wiping its scratch) runs in the
        background so the verdict does not wait for it."""
        if self.closed:
            return self._resources
        self.closed = True
        if not self._exited.is_set():
            try:  # not waited for: its last answer said what it used, and printed
                self.sock.setblocking(True)
                wire.send(self.sock, {"op": "exit"})
            except OSError:
                pass
        self._drain()  # it flushed before its last answer: everything it printed is in the pipe
        ex = self._exit
        if ex is None:  # not reaped yet: its own (informational) report with its last answer
            ex = _Exit(0, 0, _num(self._ru[0]), int(_num(self._ru[1])))
        self._resources = Resources(cpu_ms=ex.cpu_ms, maxrss_kb=ex.maxrss_kb,
                                    wall_ms=round((time.monotonic() - self.started_at) * 1000, 1))
        self.box._finish_later(self)
        return self._resources

    def _finish(self) -> None:
        if not self._exited.wait(2.0):
            self.kill()
            self._exited.wait(5.0)
        if self._out_fd >= 0:
            os.close(self._out_fd)
            self._out_fd = -1
        self.sock.close()
        self.box._forget(self)
        _wipe(self.scratch)


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0
