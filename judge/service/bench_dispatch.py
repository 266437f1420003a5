"""Dispatch latency on each backend: what the store adds to a submission, SQLite vs PostgreSQL.

``python -m judge.service.bench_dispatch [N]`` (``make bench`` runs it): for N submissions from
two clients, the milliseconds of ``Store.add`` (the API's commit; on PostgreSQL with its
Procrastinate job deferred in the same transaction), of ``Store.claim`` (a worker's fair-share
pick), and from a submission's commit to its claim by an idle worker: on PostgreSQL through the
real dispatch (``judge.service.worker_host.DispatchHost``: a Procrastinate worker woken by its
LISTEN/NOTIFY fetches the ticket and runs it as a coroutine that asks a worker slot to claim;
the slot here claims in a thread of this process instead of a worker process's pipe), on SQLite
an idle worker woken by the pool's wake-up, in-process.
PostgreSQL is a throwaway local cluster (``judge.service.pg_local``, fsync off: it measures the
judge's statements, not the disk); SQLite runs with the API's synchronous=FULL.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from judge.service.store import Store


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(url: str, n: int) -> dict:
    api, worker = Store(url, synchronous="FULL"), Store(url, synchronous="NORMAL")
    add_ms, claim_ms = [], []
    for i in range(n):  # add, then claim, one at a time
        t0 = time.perf_counter()
        sid = api.add(("a", "b")[i % 2], "glm5_mis", "submit", "x = 1", queue_max=10**9)
        t1 = time.perf_counter()
        job = worker.claim("w")
        t2 = time.perf_counter()
        worker.finish(job.id, "{}", "accepted", worker="w")
        add_ms.append((t1 - t0) * 1e3)
        claim_ms.append((t2 - t1) * 1e3)
        assert job.id == sid
    # each: (from the commit, from before Store.add: the submission's whole way to a worker)
    pairs = _through_procrastinate(url, api, worker, n) if api.backend.name == "postgresql" \
        else _through_the_pool_wakeup(api, worker, n)
    return {name: {"p50": round(statistics.median(xs), 3), "p95": round(_pct(xs, 0.95), 3)}
            for name, xs in (("add_ms", add_ms), ("claim_ms", claim_ms),
                             ("commit_to_claim_ms", [a for a, _ in pairs]),
                             ("add_to_claim_ms", [b for _, b in pairs]))}


def _through_the_pool_wakeup(api: Store, worker: Store, n: int) -> list[tuple[float, float]]:
    """SQLite: commit → claimed by an idle worker that the API wakes (``WorkerPool.notify``)."""
    woken, stop = threading.Event(), threading.Event()
    claimed: dict[str, float] = {}

    def idle_worker() -> None:
        while not stop.is_set():
            woken.wait(0.5)
            woken.clear()
            while (job := worker.claim("w")) is not None:
                claimed[job.id] = time.perf_counter()
                worker.finish(job.id, "{}", "accepted", worker="w")

    t = threading.Thread(target=idle_worker, daemon=True)
    t.start()
    time.sleep(0.5)
    out = []
    for i in range(n):
        before = time.perf_counter()
        sid = api.add(("a", "b")[i % 2], "glm5_mis", "submit", "x = 1", queue_max=10**9)
        sent = time.perf_counter()  # committed
        woken.set()
        while sid not in claimed:
            time.sleep(0.0002)
        out.append(((claimed[sid] - sent) * 1e3, (claimed[sid] - before) * 1e3))
    stop.set()
    woken.set()
    t.join(2)
    return out


class _ClaimingSlots:
    """Stands for a dispatched ``WorkerPool``: a slot's "worker" claims the ticket's mode and
    finishes at once (this measures dispatch, not grading)."""

    dispatched = True

    def __init__(self, url: str):
        self.url = url
        self.claimed: dict[str, float] = {}
        self._local = threading.local()

    def ask(self, index: int, mode: str):
        store = getattr(self._local, "store", None) or Store(self.url)
        self._local.store = store
        job = store.claim(f"w{index}", mode=mode, look_first=False)  # as Worker.take
        if job is None:
            return "empty", None
        self.claimed[job.id] = time.perf_counter()
        store.finish(job.id, "{}", "accepted", worker=f"w{index}")
        return "graded", job.id

    def stop(self) -> None:
        pass


def _through_procrastinate(url: str, api: Store, worker: Store, n: int) -> list[tuple[float, float]]:
    """PostgreSQL: commit → claimed through a Procrastinate ticket (``DispatchHost``)."""
    from judge.service.config import Config
    from judge.service.worker_host import DispatchHost

    api.execute("DELETE FROM procrastinate_jobs")  # the tickets of the add/claim loop above
    slots = _ClaimingSlots(url)
    host = DispatchHost(Config(database_url=url, workers=2), api, slots).start()
    time.sleep(1.0)  # the Procrastinate workers are listening
    out = []
    try:
        for i in range(n):
            before = time.perf_counter()
            sid = api.add(("a", "b")[i % 2], "glm5_mis", "submit", "x = 1", queue_max=10**9)
            sent = time.perf_counter()  # committed
            while sid not in slots.claimed:
                time.sleep(0.0002)
            out.append(((slots.claimed[sid] - sent) * 1e3, (slots.claimed[sid] - before) * 1e3))
    finally:
        host.stop()
    return out


def main(n: int = 200) -> dict:
    from judge.service.pg_local import LocalPostgres

    out: dict = {"n": n}
    with tempfile.TemporaryDirectory() as d:
        out["sqlite"] = measure(f"sqlite:///{Path(d) / 'bench.db'}", n)
    pg = LocalPostgres().start()
    try:
        out["postgresql"] = measure(pg.fresh_database(), n)
    finally:
        pg.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200), indent=2))
