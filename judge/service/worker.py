"""A grading worker: one process per core, each with its own warm zygote, fed from SQLite.

Grading runs the tier tests in the judge's own process (only the submission runs in the sandbox),
so workers are processes, not threads. Each worker is started with the "spawn" method (a fresh
interpreter: nothing of the API process, and no API keys, is inherited), preloads every exercise's
tests, reference, oracle and experiment and the plot writer, starts its ``Sandbox`` (fork+exec of
a fresh zygote with a scrubbed environment), says it is ready, then claims submissions one at a
time; a new submission wakes the worker that went idle last (``judge.service.idle``: its caches are warm).
Progress goes to the ``events`` table through ``grade(..., on_test=...)``, a few results per
write (``judge.service.progress``); after committing any change to a submission a worker writes its id to
the pool's pipe, so the API wakes whoever waits for it without polling.

``judge.service.pool.WorkerPool``, in the API process, starts the workers and watches them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from judge.errors import IsolationUnavailable
from judge.service.artifacts import artifacts_scratch, blob_store, keep_artifacts
from judge.service.catalog import build_previews, load_catalog
from judge.service.config import Config
from judge.service.heartbeat import Heartbeat
from judge.service.idle import IdleWorkers
from judge.service.progress import ProgressWriter, notify_change
from judge.service.store import ClaimedSubmission, Store
from judge.tuning import ANSWER_FIRST_S, SPIN_SECONDS

log = logging.getLogger("judge.service.worker")
ARTIFACTS = "artifacts"


def artifacts_dir(cfg: Config, sid: str) -> Path:
    return Path(cfg.data_dir) / ARTIFACTS / sid


# --- the worker process ---------------------------------------------------------------------

def _die_with_parent() -> None:
    try:  # PR_SET_PDEATHSIG: a SIGKILLed API process takes its workers (and so their zygotes) along
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


class Worker:
    def __init__(self, cfg: Config, name: str, index: int, count: int, changes_fd: int | None = None):
        self.cfg, self.name, self.index, self.count = cfg, name, index, count
        self.store = Store(cfg.database_url, synchronous="NORMAL")
        self.changes_fd = changes_fd  # the pool's pipe: a submission's id after each commit
        self.progress = ProgressWriter(self.store, self.changed)
        self.blobs = blob_store(cfg.data_dir, self.store)  # where the artifacts and previews are kept
        self.sandbox = None
        self.heartbeat = Heartbeat(self.store, name).start()  # any host's pool reaps us if it stops
        self.exercises = {}
        self.broken: dict[str, str] = {}
        self.pending_previews: list = []
        # the most gradings one client holds while another is active: one worker stays free for them
        self.share = max(1, cfg.workers - 1)

    # start-up ------------------------------------------------------------------------------
    def prepare(self) -> None:
        from judge.box.sandbox import StartingSandbox

        starting = StartingSandbox(**self.sandbox_options())  # the zygote imports torch meanwhile
        self.preload()
        self.sandbox = starting.get()

    def sandbox_options(self) -> dict:
        """A warm zygote (fork+exec of a fresh interpreter, scrubbed environment) with spare
        children forked ahead; refused (``IsolationUnavailable``) when it lacks a layer the
        service requires."""
        return {"spares": True, "require_isolation": not self.cfg.allow_weak_sandbox}

    def new_sandbox(self):
        from judge.box.sandbox import Sandbox

        return Sandbox(**self.sandbox_options())

    def preload(self) -> None:
        from judge.grading import warm

        self.exercises = load_catalog(self.cfg)
        warm([])  # torch settings and the plot writer
        for i, (slug, ex) in enumerate(sorted(self.exercises.items())):
            try:
                warm([ex])  # its tests, reference, oracle and experiment
            except Exception as e:  # noqa: BLE001 - one broken exercise must not stop the service
                log.exception("exercise %s cannot be graded", slug)
                self.broken[slug] = f"exercise {slug} cannot be graded on this server: {e}"
                continue
            if i % self.count == self.index:
                self.pending_previews.append(ex)

    def build_preview(self, ex) -> None:
        """The reference's T3 artifacts, built once per exercise version by any host
        (in-process: the reference is trusted)."""
        build_previews(self.cfg, self.blobs, ex)

    def changed(self, sid: str, kind: str = "s") -> None:
        """A change to ``sid`` is committed: wake the API's waiters for it (``kind``: ``s`` its
        result or state changed, ``e`` it only has new events, see ``notify_change``)."""
        notify_change(self.changes_fd, sid, kind)

    # the loop ------------------------------------------------------------------------------
    def serve(self, stop, idle: IdleWorkers, parent_pid: int, busy, orders=None) -> None:
        """Grade until stopped: claiming from the store by itself, or, with ``orders`` (a
        dispatched pool's pipe, PostgreSQL), one claim of the mode each order names."""
        while not stop.is_set() and os.getppid() == parent_pid:
            if orders is not None:
                if orders.poll(self.cfg.poll_interval if not self.pending_previews else 0):
                    try:
                        mode = orders.recv()
                    except EOFError:  # the pool is gone
                        return
                    orders.send(self.take(mode, idle, busy))
                    continue
            else:
                job = self.store.claim(self.name, share=self.share)
                if job is not None:
                    self.grade_claimed(job, idle, busy)
                    continue
            if self.pending_previews:
                ex = self.pending_previews.pop(0)
                try:
                    self.build_preview(ex)
                except Exception:  # noqa: BLE001 - previews are a nicety; grading goes on
                    log.exception("could not build the previews of %s", ex.slug)
            elif orders is None:  # woken at once by a new submission; polling catches retried ones
                idle.idle(self.index)
                idle.wait(self.index, self.cfg.poll_interval)

    def take(self, mode: str, idle: IdleWorkers, busy) -> tuple[str, str | None]:
        """One dispatch ticket of ``mode``: claim the fair-share next submission of that mode and
        grade it. ("graded", id); ("empty", None): none of that mode is queued; ("wait", None):
        some are, but the fair share passes their clients over for now (``Store.claim``), or
        the database is away (the ticket is kept and asks again)."""
        try:
            job = self.store.claim(self.name, share=self.share, mode=mode, look_first=False)
        except self.store.errors:
            log.warning("could not claim a %s submission; the ticket waits", mode, exc_info=True)
            self.store.close()  # a fresh connection next time
            return "wait", None
        if job is None:
            return ("wait", None) if self.store.has_queued(mode) else ("empty", None)
        self.grade_claimed(job, idle, busy)
        return "graded", job.id

    def grade_claimed(self, job: ClaimedSubmission, idle: IdleWorkers, busy) -> None:
        idle.busy(self.index)
        self.changed(job.id, "e")  # "running": news for event streams only
        cores = os.cpu_count() or 1
        with busy.get_lock():
            busy.value += 1
            gradings = busy.value
        # A grading alternates between this process and its sandbox: polling for the
        # other side's answer saves wake-ups while cores are free, and steals them when
        # other gradings need them.
        self.sandbox.spin_seconds = SPIN_SECONDS if 2 * gradings <= cores else 0.0
        try:
            self.run(job)
        finally:
            with busy.get_lock():
                busy.value -= 1
            idle.idle(self.index, latest=True)  # the next submission wakes us first

    def run(self, job: ClaimedSubmission) -> None:
        told = False
        try:
            told = self._run(job)
        finally:
            if not told:  # its new state: an error, a retry, or the artifacts after the verdict
                self.changed(job.id)

    def _run(self, job: ClaimedSubmission) -> bool:
        """Grade ``job`` and store the outcome; True if the API was already told of it."""
        from judge.grading import grade

        ex = self.exercises.get(job.exercise)
        if ex is None or job.exercise in self.broken:
            self.store.fail(job.id, self.broken.get(job.exercise, f"unknown exercise {job.exercise!r}"))
            return False
        out_dir = artifacts_scratch(self.cfg.data_dir, job.id)  # kept once our verdict is stored
        t0 = time.perf_counter()

        def on_test(tier: str, result) -> None:
            self.progress.add(job.id, {"tier": tier, **result.model_dump()})

        answered, stored = [], []  # stored: whether our verdict was (a stale worker's is not)

        def on_verdict(early) -> None:  # the verdict is known; its plots are drawn next
            if early.verdict != "error" and self.sandbox.alive:
                with self.progress.taken() as tests:  # every test's result, then the verdict
                    stored.append(self.store.finish(job.id, early.model_dump_json(), early.verdict, tests,
                                                    worker=self.name))
                self.changed(job.id)
                # The API, just woken, answers before the plots are drawn: with no submission
                # waiting, this worker gives it the cores for a moment (ANSWER_FIRST_S, measured:
                # judge.tuning). Under a backlog it draws at once.
                if not self.store.has_queued():
                    time.sleep(ANSWER_FIRST_S)
                else:
                    os.sched_yield()
                answered.append(early)

        try:
            verdict = grade(ex, job.code, sandbox=self.sandbox, mode=job.mode, out_dir=out_dir,
                            on_test=on_test, on_verdict=on_verdict)
        except BaseException as e:  # noqa: BLE001 - grade() reports its own failures; this is a bug
            if isinstance(e, (SystemExit, KeyboardInterrupt)) and _SHUTDOWN.is_set():
                raise  # this worker is being stopped (SIGTERM): not a grading's doing
            # Whatever else escaped (a SubmissionFailure, any BaseException): the worker lives on.
            log.exception("grading %s failed", job.id)
            self.progress.flush(notify=False)
            self.store.retry_or_fail(job.id, f"the judge failed while grading: {type(e).__name__}",
                                     worker=self.name)
            return False
        if not self.sandbox.alive:  # the zygote died under us: not the submission's doing
            log.error("the sandbox zygote of %s stopped; restarting it", self.name)
            self.progress.flush(notify=False)
            self.sandbox.close()
            self.sandbox = self.new_sandbox()
            if verdict.verdict == "error":
                self.store.retry_or_fail(job.id, "the sandbox stopped while grading", worker=self.name)
                return False
        for a in verdict.artifacts:  # the service's storage key: the URL it is served at
            a.path = f"/submissions/{job.id}/artifacts/{a.name}"
        told = not answered
        if answered:
            keep_artifacts(self.blobs, job.id, out_dir, verdict, ex.limits.artifact_bytes, keep=stored[0])
            self.store.add_artifacts(job.id, verdict.model_dump_json(), worker=self.name)
        else:  # no plots: this is the verdict
            with self.progress.taken() as tests:
                stored.append(self.store.finish(job.id, verdict.model_dump_json(), verdict.verdict, tests,
                                                worker=self.name))
            keep_artifacts(self.blobs, job.id, out_dir, verdict, ex.limits.artifact_bytes, keep=stored[0])
            self.changed(job.id)
        log.info("graded %s (%s, %s): %s in %.0f ms", job.id, job.exercise, job.mode, verdict.verdict,
                 (time.perf_counter() - t0) * 1000)
        return told

    def close(self) -> None:
        self.heartbeat.stop()
        if self.sandbox is not None:
            self.sandbox.close()


# Set when this worker process is told to stop: only then may SystemExit leave a grading.
_SHUTDOWN = threading.Event()


def _stop_worker(*_) -> None:
    _SHUTDOWN.set()
    sys.exit(0)


EXIT_REFUSED = 78  # a worker's exit status when it refuses to run (EX_CONFIG): not restarted


def worker_main(cfg: Config, name: str, index: int, count: int, ready, stop, idle: IdleWorkers,
                parent_pid: int, busy, changes=None, orders=None) -> None:
    """The entry point of a worker process; ``changes`` is the write end of the pool's pipe,
    ``orders`` its own order pipe in a dispatched pool (``WorkerPool.ask``)."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the API; it stops us via ``stop``
    signal.signal(signal.SIGTERM, _stop_worker)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(levelname)s %(name)s[{name}]: %(message)s")
    if os.getppid() != parent_pid:
        return
    worker = Worker(cfg, name, index, count, changes.fileno() if changes is not None else None)
    code = 0
    try:
        worker.prepare()
        ready.set()
        log.info("worker %s ready (pid %d)", name, os.getpid())
        worker.serve(stop, idle, parent_pid, busy, orders)
    except IsolationUnavailable as e:
        log.critical("%s", e)
        code = EXIT_REFUSED
    finally:
        worker.close()
    logging.shutdown()
    os._exit(code)  # skip the interpreter's slow teardown of torch
