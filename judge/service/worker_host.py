"""``judge worker``: a grading host with no API, fed from a shared PostgreSQL through Procrastinate.

Any number of hosts run it against one PostgreSQL (``JUDGE_DATABASE_URL=postgresql://…``), beside
API-only nodes (``judge serve --workers 0``). Each keeps ``--concurrency`` worker processes, each
with its own warm zygote (``judge.service.pool.WorkerPool``, dispatched: they take orders), and
runs Procrastinate workers in this process (``DispatchHost``): each Procrastinate job is a
ticket for a mode (``judge.service.dispatch``), run as a coroutine that hands it to a free local
worker process and awaits its answer; the process claims the fair-share next submission of that
mode from the store and grades it. One Procrastinate worker serves both queues (Runs first, by
priority) on N - 1 slots, another serves only ``run`` on the last slot, so a backlog of Submits
never delays a Run by more than the Run grading ahead of it (with one process, one worker
serves both). ``judge serve`` on PostgreSQL with workers of its own runs the same.

Interruptions: each grading beats every 2 s (``judge.service.heartbeat``); every host's pool takes
back a grading without a beat for 10 s (retried once, then error, ``Store.reap_stalled``), and a
stale worker's verdict is refused (``Store.finish(worker=...)``). Procrastinate's workers beat
too; every host retries the tickets of a Procrastinate worker silent for 10 s
(``JobManager.get_stalled_jobs`` then ``retry_job``, Procrastinate's documented recipe), and
defers the tickets any queued submission lacks (``Store.reconcile_tickets``). Retries are
bounded by the store (attempts), never by ticket redelivery: a surplus ticket finds nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from judge.service.catalog import load_catalog
from judge.service.config import Config
from judge.service.dispatch import TASK
from judge.service.pool import WorkerPool
from judge.service.store import HEARTBEAT_S, STALL_S, Store

log = logging.getLogger("judge.service.worker_host")
PRUNE_WORKERS_S = 3600.0  # Procrastinate worker rows silent this long are deleted at a start


def _unchecked_pool(**kwargs):
    """Procrastinate's connection pool without its check of every connection it lends (one round
    trip more on each fetch, which is on every submission's path): a connection that broke is
    found broken at its next query instead, the pool drops it, and the Procrastinate worker
    that met it is started again (``DispatchHost._supervise``)."""
    from psycopg_pool import AsyncConnectionPool

    kwargs.pop("check", None)
    return AsyncConnectionPool(**kwargs)


def _worker_class():
    """Procrastinate's worker, minus a lost wake-up: its fetch loop clears the "new job" event
    after a fetch that found nothing, so a job committed just after that fetch's snapshot, whose
    notification lands before the clear, waits for the next poll (seen in bench_dispatch as a
    p95 of one poll interval). Here a notification heard while the loop ran makes it fetch
    again. (Procrastinate 3.10's private ``_fetch_and_process_jobs`` and ``_handle_notification``:
    pinned by pyproject's procrastinate~=3.10.)"""
    from procrastinate.worker import Worker

    class RecheckingWorker(Worker):
        _heard = False

        async def _handle_notification(self, *, channel, notification):
            self._heard = True
            await super()._handle_notification(channel=channel, notification=notification)

        async def _fetch_and_process_jobs(self):
            while True:
                self._heard = False
                await super()._fetch_and_process_jobs()
                if not self._heard or self._stop_event.is_set():
                    return

    return RecheckingWorker


class DispatchHost:
    """Procrastinate workers in a thread of their own (an asyncio loop), feeding ``pool``."""

    def __init__(self, cfg: Config, store: Store, pool: WorkerPool):
        assert pool.dispatched and cfg.workers > 0
        self.cfg, self.store, self.pool = cfg, store, pool
        self.stopping = False
        self.failed: BaseException | None = None  # why the loop ended, when it was not stop()
        self.tickets = {"graded": 0, "empty": 0, "returned": 0}  # what came of the tickets run here
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list = []
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="dispatch", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> "DispatchHost":
        logging.getLogger("procrastinate").setLevel(logging.WARNING)  # else two lines per ticket
        self._thread.start()
        if not self._started.wait(timeout):
            raise RuntimeError("the Procrastinate workers did not start")
        if self.failed is not None:
            raise self.failed
        return self

    def stop(self) -> None:
        """Stop fetching tickets, give back the waiting ones, stop the pool (gradings it cuts
        short are released, queued again with a new ticket), then the Procrastinate workers."""
        self.stopping = True
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(lambda: [w.stop() for w in self._workers])
        self.pool.stop()
        self._thread.join(30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # noqa: BLE001 - reported through ``failed`` and the log
            if not self.stopping:
                log.exception("the dispatch loop failed")
                self.failed = e
        finally:
            self._started.set()

    # --- the loop -----------------------------------------------------------------------------
    def make_app(self):
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=self.cfg.database_url, min_size=2, max_size=4, pool_factory=_unchecked_pool))

        @app.task(name=TASK)
        async def grade(mode: str, submission: str | None = None) -> str:
            return await self.ticket(mode)

        return app

    def _worker_options(self) -> list[dict]:
        n = self.cfg.workers
        name = f"host{os.getpid()}"
        common = dict(install_signal_handlers=False, listen_notify=True, delete_jobs="successful",
                      # the fallback poll (LISTEN/NOTIFY wakes it first) is an idle worker's look at
                      # the queue: a notification that lands while a fetch finds nothing is lost
                      # to Procrastinate's worker, and this bounds what that costs
                      fetch_job_polling_interval=self.cfg.poll_interval, update_heartbeat_interval=HEARTBEAT_S,
                      stalled_worker_timeout=PRUNE_WORKERS_S, shutdown_graceful_timeout=None)
        if n == 1:
            return [dict(queues=["run", "submit"], concurrency=1, name=f"{name}-any", **common)]
        return [dict(queues=["run", "submit"], concurrency=n - 1, name=f"{name}-any", **common),
                dict(queues=["run"], concurrency=1, name=f"{name}-run", **common)]

    async def _run(self) -> None:
        Worker = _worker_class()
        self._loop = asyncio.get_running_loop()
        self._loop.set_default_executor(ThreadPoolExecutor(self.cfg.workers + 4, thread_name_prefix="dispatch"))
        self._free: asyncio.Queue[int] = asyncio.Queue()
        for i in range(self.cfg.workers):
            self._free.put_nowait(i)
        app = self.make_app()
        async with app.open_async():
            maintenance = asyncio.create_task(self._maintain(app), name="maintenance")
            runners = [asyncio.create_task(self._supervise(app, Worker, opts)) for opts in self._worker_options()]
            self._started.set()
            try:
                await asyncio.gather(*runners)
            finally:
                maintenance.cancel()
                await asyncio.gather(maintenance, return_exceptions=True)

    async def _supervise(self, app, worker_cls, options: dict) -> None:
        """One Procrastinate worker, restarted after a failure (the database was away) until stop."""
        while not self.stopping:
            worker = worker_cls(app, **options)
            self._workers.append(worker)
            try:
                await worker.run()
            except Exception:  # noqa: BLE001 - the database was away: start again
                log.exception("Procrastinate worker %s stopped; restarting it", options["name"])
            finally:
                self._workers.remove(worker)
            if not self.stopping:
                await asyncio.sleep(1.0)

    async def ticket(self, mode: str) -> str:
        """One ticket: a free local worker process claims the fair-share next submission of
        ``mode`` and grades it. While the fair share passes every queued one of ``mode`` over
        (their clients hold their share), the ticket waits and asks again, as an idle worker
        polls; a stopping host gives its waiting tickets back (another in the queue)."""
        index = await self._free.get()
        try:
            while True:
                if self.stopping:
                    await asyncio.to_thread(self.store.return_ticket, mode)
                    return self._count("returned")
                reply = await asyncio.to_thread(self.pool.ask, index, mode)
                if reply is None:  # the worker died, or the pool stops: this ticket goes back
                    await asyncio.to_thread(self.store.return_ticket, mode)
                    return self._count("returned")
                kind, _sid = reply
                if kind != "wait":
                    return self._count(kind)
                await asyncio.sleep(self.cfg.poll_interval)
        finally:
            self._free.put_nowait(index)

    def _count(self, kind: str) -> str:
        self.tickets[kind] = self.tickets.get(kind, 0) + 1
        return kind

    async def _maintain(self, app) -> None:
        """Every heartbeat: retry the tickets of Procrastinate workers silent for ``STALL_S`` (a
        host killed or cut off), and defer any ticket a queued submission lacks."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=STALL_S):
                    log.warning("ticket %s (%s) stalled with its worker; retrying it", job.id, job.task_kwargs)
                    try:
                        await app.job_manager.retry_job(job)
                    except Exception:  # noqa: BLE001 - another host retried it first
                        log.info("ticket %s was retried elsewhere", job.id)
                missing = await asyncio.to_thread(self.store.reconcile_tickets)
                if missing:
                    log.warning("deferred missing tickets: %s", missing)
            except Exception:  # noqa: BLE001 - the database is away: the next round tries again
                log.exception("could not look for stalled tickets")


def run(cfg: Config) -> int:
    """Grade until SIGTERM or SIGINT; 0 on a clean stop, 1 if the workers refused to run or the
    dispatch loop failed. On a SQLite file (one machine) the workers claim from it by polling."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    store = Store(cfg.database_url, synchronous="FULL")
    catalog = load_catalog(cfg)
    dispatched = store.backend.name == "postgresql"
    pool = WorkerPool(cfg, store, {s: ex.limits.total_seconds for s, ex in catalog.items()}, dispatched=dispatched)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pool.start()
    host = DispatchHost(cfg, store, pool).start() if dispatched else None
    print(f"judge: worker host with {cfg.workers} worker(s); database {cfg.database_name}", flush=True)
    reported = False
    while not stop.wait(0.5):
        if not reported and pool.ready_count == cfg.workers:
            print(f"judge: {cfg.workers} worker(s) ready", flush=True)
            reported = True
        if pool.fatal or (host is not None and not host.alive):
            break
    if host is not None:
        host.stop()
    else:
        pool.stop()
    store.close()
    return 1 if pool.fatal or (host is not None and host.failed) else 0
