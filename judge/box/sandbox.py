"""The judge's side of the sandbox: start the zygote, open jobs, end them.

One ``Sandbox`` owns one zygote process (``python -m sandbox.zygote``, scrubbed environment) and
can run many jobs at once (``judge.box.job.Job``: one forked child holding one submission). With
spares, a locked-down child is forked ahead of need; closed jobs are reaped and wiped in the
background.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from judge.errors import IsolationUnavailable, SandboxError, SubmissionFailure
from judge.exercise import Limits
from judge.box.job import Job, JobHost, _wipe
from judge.pids import alive
import sandbox
from sandbox.lockdown import EAGER_COMPILE, NO_ACCELERATORS, SANDBOX_UID
from judge.tuning import SPARE_DELAY, SPARES_AHEAD, SPIN_SECONDS  # the measured why: judge.tuning

log = logging.getLogger("judge.box.sandbox")
# The folder that holds the ``sandbox`` package (a checkout or site-packages): the zygote's PYTHONPATH.
REPO_ROOT = Path(sandbox.__file__).resolve().parent.parent
_ENV_PASSTHROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


SCRATCH_BYTES = 64 << 20  # the scratch tmpfs of one job (as root)
_libc = ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, size: int, uid: int) -> None:
    opts = f"size={size},nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", ctypes.c_ulong(0x2 | 0x8 | 0x4), opts) != 0:
        e = ctypes.get_errno()  # MS_NOSUID | MS_NOEXEC | MS_NODEV
        raise SandboxError(f"could not mount the scratch tmpfs at {path}: {os.strerror(e)}")


def _sweep_stale_scratch(base: Path) -> None:
    """Wipe the scratch of sandboxes whose process is gone (killed before it could clean up):
    as root each job's scratch is a tmpfs mount, which would otherwise outlive it."""
    for root in base.glob("judge-scratch-*-*"):
        pid = root.name.split("-")[2]
        if not pid.isdigit() or root.is_symlink() or not root.is_dir():
            continue
        if alive(int(pid)):
            continue  # still running (or the pid was reused): not ours to touch
        for scratch in root.iterdir():
            _wipe(scratch)
        shutil.rmtree(root, ignore_errors=True)


class Sandbox:
    """A warm zygote and the jobs forked from it."""

    def __init__(self, scratch_root: str | None = None, start_timeout: float = 60.0,
                 require_isolation: bool = False, spares: bool = False):
        """``require_isolation``: refuse to run when Landlock or seccomp is missing
        (``IsolationUnavailable``; the service does, unless told to allow a weak sandbox;
        ``judge local`` only warns). ``spares``: keep locked-down children forked ahead
        (``SPARES_AHEAD``; the service's workers do: it takes the fork and lockdown off each
        verdict's path)."""
        self.spares = spares
        self.spin_seconds = SPIN_SECONDS  # how long both sides poll before sleeping (0: never)
        self._spare: dict[tuple, list[_Spare]] = {}  # limits → spares, oldest first
        self._wanted = threading.Event()  # a job is being opened: fork a delayed spare now
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._host = JobHost(kill=self._kill, finish_later=self._finish_later, forget=self._forget,
                             spin_seconds=lambda: self.spin_seconds)  # given to every job
        self.info: dict = {}
        self.root = os.geteuid() == 0
        base = scratch_root or os.environ.get("JUDGE_SCRATCH_DIR") or tempfile.gettempdir()
        _sweep_stale_scratch(Path(base))
        self.scratch_root = Path(tempfile.mkdtemp(prefix=f"judge-scratch-{os.getpid()}-", dir=base))
        os.chmod(self.scratch_root, 0o711)
        self._ready = threading.Event()
        # Closed jobs are reaped and wiped, and spares forked, by two long-lived threads: starting
        # a thread per job costs milliseconds on a busy machine, on the verdict's path.
        self._finish_q: queue.Queue = queue.Queue()  # closed jobs' clean-up
        self._background: queue.Queue = queue.Queue()  # spare children to fork
        for q, name in ((self._finish_q, "job-finisher"), (self._background, "spare-forker")):
            threading.Thread(target=_run_tasks, args=(q, name), name=name, daemon=True).start()
        self._start(start_timeout)
        if self.weaknesses:
            if require_isolation:
                self.close()
                raise IsolationUnavailable("refusing to run untrusted code without " + " and ".join(
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
               "OPENBLAS_NUM_THREADS": "1", **NO_ACCELERATORS, **EAGER_COMPILE}
        env.update({k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ})
        self.proc = subprocess.Popen(
            # a zygote that keeps spares forks one child per submission: fork cheaper (2 MB pages)
            [sys.executable, "-m", "sandbox.zygote", str(theirs.fileno())]
            + (["--huge-pages"] if self.spares else []),
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
                job.on_event(msg)
        self.alive = False
        for job in list(self._jobs.values()):
            job.on_event({"event": "exited", "status": -9, "signal": 9, "cpu_ms": 0, "maxrss_kb": 0,
                        "zygote_gone": True})

    alive = True

    def close(self) -> None:
        self.spares = False
        self._wanted.set()  # a spare held back (SPARE_DELAY) stops waiting, and is not forked
        for spare in [sp for spares in list(self._spare.values()) for sp in spares]:
            spare.ready.wait(5.0)
        self._background.put(None)
        for job in list(self._jobs.values()):  # spares and jobs never closed: reaped and wiped too
            job.kill()
            if not job.closed:
                job.closed = True
                self._finish_q.put(job.finish)
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
        locked down in advance (when an earlier job closed) and is handed out now."""
        if not self.alive:
            raise SandboxError("the sandbox zygote has stopped")
        if not self.spares:
            return self._open(limits)
        key = (limits.cpu_seconds, limits.memory_mb)
        with self._lock:
            spares = self._spare.get(key, [])
            # a ready one if there is one, else the oldest (which is being forked)
            spare = next((sp for sp in spares if sp.ready.is_set()), spares[0] if spares else None)
            if spare is not None:
                spares.remove(spare)
        if spare is not None and not spare.ready.is_set():
            self._wanted.set()  # held back after a close (SPARE_DELAY): wanted now
        job = spare.take() if spare is not None else None
        if job is None:
            job = self._open(limits)
        # Its successor is forked when this job closes: forking and locking it down now would
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
        job = Job(self._host, job_id, host_sock, out_r, scratch, limits)
        self._jobs[job_id] = job
        req = {"op": "start", "id": job_id, "scratch": str(scratch),
               "limits": {"cpu_seconds": int(limits.cpu_seconds), "memory_mb": int(limits.memory_mb)},
               "prewarm": self.spares}  # a spare warms up before it is needed; others need not wait
        try:
            with self._lock:
                socket.send_fds(self.ctrl, [json.dumps(req).encode()], [child_sock.fileno(), out_w])
        except OSError as e:
            self._jobs.pop(job_id, None)
            raise SandboxError(f"could not reach the sandbox zygote: {e}") from e
        finally:
            child_sock.close()
            os.close(out_w)
        try:
            job.wait_hello()
        except BaseException:  # never handed out: ended here (killed, reaped, wiped)
            job.kill()
            job.close()
            raise
        if self.info.get("cgroups"):  # a child says hello only once it is in its own groups
            job.layers.append("cgroup memory+pids")
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
        self._finish_q.put(job.finish)
        key = job.spare_key
        if key is not None and self.spares and self.alive:
            with self._lock:
                spares = self._spare.setdefault(key, [])
                if len(spares) < SPARES_AHEAD:
                    self._wanted.clear()
                while len(spares) < SPARES_AHEAD:
                    spares.append(_Spare(self, job.limits, delay=SPARE_DELAY))

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until every closed job has been reaped and wiped."""
        deadline = time.monotonic() + timeout
        while self._finish_q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)


class StartingSandbox:
    """A ``Sandbox`` started in a background thread: its zygote (a fresh interpreter that imports
    torch, 1-3 s) starts while the caller loads exercises. ``get()`` waits for it and raises
    what stopped it; ``close()`` closes it once it has started."""

    def __init__(self, **options):
        self._sandbox: Sandbox | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, args=(options,), name="sandbox-start",
                                        daemon=True)
        self._thread.start()

    def _start(self, options: dict) -> None:
        try:
            self._sandbox = Sandbox(**options)
        except BaseException as e:  # noqa: BLE001 - raised by get()
            self._error = e

    def get(self) -> Sandbox:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._sandbox

    def close(self) -> None:
        self._thread.join()
        if self._sandbox is not None:
            self._sandbox.close()


def _run_tasks(tasks: queue.Queue, name: str) -> None:
    """Run the callables put on ``tasks`` one after another, until a None."""
    while True:
        task = tasks.get()
        try:
            if task is None:
                return
            task()
        except Exception:  # noqa: BLE001 - one task's failure must not stop the next
            log.exception("%s: a task failed", name)
        finally:
            tasks.task_done()


class _Spare:
    """A child being forked and locked down ahead of need, by the sandbox's background thread."""

    def __init__(self, box: Sandbox, limits: Limits, delay: float = 0.0):
        self.job: Job | None = None
        self.ready = threading.Event()
        box._background.put(lambda: self._open(box, limits, delay))

    def _open(self, box: Sandbox, limits: Limits, delay: float) -> None:
        try:
            if delay:  # see SPARE_DELAY; a job being opened wants it now
                box._wanted.wait(delay)
            if not box.spares:  # the sandbox is closing
                return
            self.job = box._open(limits)
        except (SandboxError, SubmissionFailure) as e:
            log.warning("could not fork a spare sandbox: %s", e)
        finally:
            self.ready.set()

    def take(self) -> "Job | None":
        self.ready.wait(30.0)
        job = self.job
        if job is None or job.exited:
            return None
        return job
