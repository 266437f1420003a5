"""Dispatch latency on each backend: what the store adds to a submission, SQLite vs PostgreSQL.

``python -m judge.service.bench_dispatch [N]`` (``make bench`` runs it): for N submissions from
two clients, the milliseconds of ``Store.add`` (the API's commit), of ``Store.claim`` (a worker's
fair-share pick), and from a submission's commit to its claim by an idle worker that waits for it
(on PostgreSQL woken by LISTEN/NOTIFY, on SQLite by the pool's wake-up, both in-process here).
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
    add_ms, claim_ms, handoff_ms = [], [], []
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
    # commit → claimed by an idle worker that is woken by the notification
    woken, stop = threading.Event(), threading.Event()
    claimed: dict[str, float] = {}

    def idle_worker() -> None:
        while not stop.is_set():
            woken.wait(0.5)
            woken.clear()
            while (job := worker.claim("w")) is not None:
                claimed[job.id] = time.perf_counter()
                worker.finish(job.id, "{}", "accepted", worker="w")

    listener = threading.Thread(target=Store(url).listen, args=(lambda _sid: woken.set(), stop), daemon=True)
    listener.start()
    t = threading.Thread(target=idle_worker, daemon=True)
    t.start()
    time.sleep(0.5)
    for i in range(n):
        sent = time.perf_counter()
        sid = api.add(("a", "b")[i % 2], "glm5_mis", "submit", "x = 1", queue_max=10**9)
        if api.backend.name == "sqlite":
            woken.set()  # one host: the API wakes its pool directly (WorkerPool.notify)
        while sid not in claimed:
            time.sleep(0.0002)
        handoff_ms.append((claimed[sid] - sent) * 1e3)
    stop.set()
    woken.set()
    t.join(2)
    listener.join(3)
    return {name: {"p50": round(statistics.median(xs), 3), "p95": round(_pct(xs, 0.95), 3)}
            for name, xs in (("add_ms", add_ms), ("claim_ms", claim_ms), ("commit_to_claim_ms", handoff_ms))}


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
