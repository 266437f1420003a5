"""The pool of grading workers, in the API process.

``WorkerPool`` starts one worker process per slot (``judge.service.worker``, "spawn": nothing of
the API process is inherited), restarts one that dies (its submission is retried once, then
marked error), kills one whose grading overruns every limit, and stops them on shutdown. The
workers write a submission's id to the pool's pipe after each commit; the API reads it there.

Two ways to feed them: on SQLite each worker claims from the store by itself (polling, woken by
``notify``); ``dispatched`` (PostgreSQL) each takes orders on a pipe of its own: ``ask(slot,
mode)`` is one Procrastinate ticket of ``mode`` (``judge.service.dispatch``), which the worker
turns into a fair-share claim of that mode and a grading, and answers what came of it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from judge.service.config import Config
from judge.service.idle import IdleWorkers
from judge.service.progress import notify_change
from judge.service.store import Store
from judge.service.worker import EXIT_REFUSED, worker_main

log = logging.getLogger("judge.service.pool")
OVERRUN_GRACE_S = 60.0  # a grading this far past its exercise's total limit means a stuck worker
START_GRACE_S = 5.0  # a worker dead this soon after its start died starting (not grading)
RESPAWN_MAX_S = 30.0  # the longest wait before starting again a worker that keeps dying at start


@dataclass
class Slot:
    """One worker's place in the pool: the process now in it, and how many have been."""

    index: int  # the worker's index (its share of the preview builds, its idle bit)
    generation: int = 0  # processes started in this slot so far (a restart adds one)
    name: str = ""  # the running process's worker name, "w<index>.<generation>.<api pid>"
    proc: Any = None  # its multiprocessing Process, None before the first start and after stop
    ready: Any = None  # its ready Event (set once it has preloaded and started its sandbox)
    started: float = 0.0  # time.monotonic() of its start (a crash at start-up is not respun at once)
    orders: Any = None  # dispatched pools: the pool's end of the process's order pipe (``ask``)
    quick_deaths: int = 0  # deaths in a row within START_GRACE_S of a start (e.g. no database)
    respawn_at: float = 0.0  # time.monotonic() before which a dead process is not started again


class WorkerPool:
    """The workers of one service (``cfg.workers`` slots), started, watched and stopped here."""

    def __init__(self, cfg: Config, store: Store, limits: dict[str, float] | None = None, *,
                 dispatched: bool = False):
        self.cfg, self.store = cfg, store
        self.dispatched = dispatched  # workers take orders (``ask``) instead of polling the store
        self.limits = limits or {}  # exercise → its total_seconds, for the overrun watchdog
        self.ctx = mp.get_context("spawn")
        self.stop_event = self.ctx.Event()
        self.idle = IdleWorkers(self.ctx, cfg.workers)  # a new submission wakes the last idle
        self.busy = self.ctx.Value("i", 0)  # workers grading right now
        # Workers write a submission's id here after each commit; the API reads it (Changes).
        self._changes_r, self._changes_w = self.ctx.Pipe(duplex=False)
        os.set_blocking(self._changes_w.fileno(), False)  # shared by every writer: never blocks
        self.slots: list[Slot] = []
        self.fatal: str | None = None
        self._stopping = False
        self._monitor: threading.Thread | None = None

    def start(self) -> None:
        for i in range(self.cfg.workers):
            self.slots.append(Slot(i))
            self._spawn(self.slots[-1])
        self._monitor = threading.Thread(target=self._watch, name="worker-pool", daemon=True)
        self._monitor.start()

    def _spawn(self, slot: Slot) -> None:
        slot.generation += 1
        slot.name = f"w{slot.index}.{slot.generation}.{os.getpid()}"
        slot.ready = self.ctx.Event()
        theirs = None
        if self.dispatched:
            if slot.orders is not None:
                slot.orders.close()  # the dead process's: a caller blocked on it gets EOF
            slot.orders, theirs = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=worker_main, name=f"judge-worker-{slot.index}", daemon=True,
                                args=(self.cfg.without_secrets(), slot.name, slot.index,
                                      self.cfg.workers, slot.ready, self.stop_event, self.idle,
                                      os.getpid(), self.busy, self._changes_w)
                                + ((theirs,) if theirs is not None else ()))
        proc.start()
        if theirs is not None:
            theirs.close()  # only the worker holds its end: its death is EOF here
        slot.proc, slot.started = proc, time.monotonic()

    def ask(self, index: int, mode: str) -> tuple[str, str | None] | None:
        """A dispatched pool: slot ``index``'s worker claims the fair-share next submission of
        ``mode`` and grades it (blocking; one caller per slot at a time). Its answer: ("graded",
        id), ("empty", None) when none of ``mode`` is queued, ("wait", None) when some are but
        the fair share passes their clients over for now; None when the worker died meanwhile
        (the pool takes its grading back: ``_recover``) or the pool is stopping."""
        slot = self.slots[index]
        while not self._stopping:  # a worker still starting, or being restarted after a death
            proc, ready, orders = slot.proc, slot.ready, slot.orders
            if proc is not None and ready is not None and orders is not None and proc.is_alive() \
                    and ready.wait(0.2):
                break
        else:
            return None
        try:
            orders.send(mode)
            return orders.recv()
        except (EOFError, OSError):
            return None

    def notify(self) -> None:
        """A submission was queued: wake the most recently idle worker now rather than at its
        next poll (``judge.service.idle``)."""
        try:
            self.idle.wake_one()
        except (ValueError, OSError, AttributeError):  # stopping
            pass

    @property
    def changes_fd(self) -> int:
        """The read end of the workers' change notifications, for ``Changes`` in the API."""
        return self._changes_r.fileno()

    @property
    def ready_count(self) -> int:
        return sum(1 for s in self.slots if s.proc is not None and s.ready is not None
                   and s.proc.is_alive() and s.ready.is_set())

    def _watch(self) -> None:
        last_overrun_check = 0.0
        while not self._stopping:
            for slot in self.slots:
                proc = slot.proc
                if self._stopping or proc is None or proc.is_alive():
                    continue
                if proc.exitcode == EXIT_REFUSED:
                    self.fatal = "the sandbox lacks required isolation layers (see the log)"
                    log.critical("a worker refused to run: %s; stopping the service", self.fatal)
                    self._stopping = True
                    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down cleanly
                    return
                if slot.respawn_at == 0.0:  # just found dead: take its grading back, then wait
                    log.error("worker %s exited (code %s); restarting it", slot.name, proc.exitcode)
                    self._recover(slot.name, "the grading worker stopped unexpectedly")
                    slot.respawn_at = time.monotonic() + self.respawn_delay(slot)
                if not self._stopping and time.monotonic() >= slot.respawn_at:
                    slot.respawn_at = 0.0
                    self._spawn(slot)
            if time.monotonic() - last_overrun_check > 2.0:
                last_overrun_check = time.monotonic()
                self._kill_overruns()
                self._reap_stalled()
            time.sleep(0.2)

    @staticmethod
    def respawn_delay(slot: Slot) -> float:
        """How long a dead worker's slot waits before its next start: at once after a death while
        grading; after deaths at start-up in a row (its host cut off from the database: each
        start a fresh interpreter and zygote), 2 s, 4 s, 8 s, … up to ``RESPAWN_MAX_S``, so a
        long outage does not burn the host's cores on restarts."""
        if time.monotonic() - slot.started >= START_GRACE_S:
            slot.quick_deaths = 0
            return 0.0
        slot.quick_deaths += 1
        return min(2.0 * 2 ** (slot.quick_deaths - 1), RESPAWN_MAX_S)

    def _recover(self, worker: str, message: str) -> None:
        try:
            for sid in self.store.recover(worker, message=message):
                notify_change(self._changes_w.fileno(), sid)
        except Exception:  # noqa: BLE001 - the next start-up recovers it
            log.exception("could not recover the submissions of %s", worker)

    def _reap_stalled(self) -> None:
        """Gradings whose worker (here or on any host) stopped beating: retried once, then error."""
        try:
            for sid, fate in self.store.reap_stalled().items():
                log.error("submission %s stalled (no heartbeat): %s", sid, fate)
                notify_change(self._changes_w.fileno(), sid)
        except Exception:  # noqa: BLE001 - the database is away: the next round tries again
            log.exception("could not look for stalled gradings")

    def _kill_overruns(self) -> None:
        try:
            rows = self.store.running()
        except Exception:  # noqa: BLE001
            return
        now = time.time()
        for row in rows:
            limit = self.limits.get(row["exercise"], 60.0) + OVERRUN_GRACE_S
            if row["started_at"] and now - row["started_at"] > limit:
                for slot in self.slots:
                    if slot.name == row["worker"] and slot.proc is not None and slot.proc.is_alive():
                        log.error("worker %s overran %s's limits; killing it", row["worker"], row["exercise"])
                        slot.proc.kill()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self.stop_event.set()
        for _ in self.slots:
            self.notify()
        deadline = time.monotonic() + timeout
        for slot in self.slots:
            proc = slot.proc
            if proc is None:
                continue
            proc.join(max(deadline - time.monotonic(), 0.1))
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
            try:  # a grading cut short by our own shutdown does not count as an attempt
                for row in self.store.running(slot.name):
                    self.store.release(row["id"])
            except Exception:  # noqa: BLE001 - the next start-up recovers it
                log.exception("could not release the submissions of %s", slot.name)
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(2.0)  # last: workers it started die with it (PR_SET_PDEATHSIG)
        for slot in self.slots:  # free the semaphores now, not at interpreter exit
            if slot.orders is not None:
                slot.orders.close()
            slot.ready = slot.proc = slot.orders = None
        self.stop_event = self.idle = None
        self._changes_w.close()  # the API stopped listening (Changes.stop) before this
        self._changes_r.close()
