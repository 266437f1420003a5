"""``judge worker``: a grading host with no API, fed from a shared database.

Any number of hosts run it against one PostgreSQL (``JUDGE_DATABASE_URL=postgresql://…``), beside
API-only nodes (``judge serve --workers 0``). Each keeps ``--concurrency`` worker processes, each
with its own warm zygote (``judge.service.pool.WorkerPool``, as in ``judge serve``). They claim
submissions from the store by the same fair share as on one host (the claim is one transaction
under the database's write lock, whichever host makes it), beat while grading
(``judge.service.heartbeat``), and each host's pool takes back the gradings of any worker, here
or elsewhere, that stopped beating (``Store.reap_stalled``: retried once, then error).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

from judge.service.catalog import load_catalog
from judge.service.config import Config
from judge.service.pool import WorkerPool
from judge.service.store import Store

log = logging.getLogger("judge.service.worker_host")


def run(cfg: Config) -> int:
    """Grade until SIGTERM or SIGINT; 0 on a clean stop, 1 if the workers refused to run."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    store = Store(cfg.database_url, synchronous="FULL")
    catalog = load_catalog(cfg)
    pool = WorkerPool(cfg, store, {s: ex.limits.total_seconds for s, ex in catalog.items()})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pool.start()
    # a submission queued on any host wakes one of our idle workers at once (else: their poll)
    threading.Thread(target=store.listen, args=(lambda _sid: pool.notify(), stop), name="queued",
                     daemon=True).start()
    print(f"judge: worker host with {cfg.workers} worker(s); database {cfg.database_name}", flush=True)
    reported = False
    while not stop.wait(0.5):
        if not reported and pool.ready_count == cfg.workers:
            print(f"judge: {cfg.workers} worker(s) ready", flush=True)
            reported = True
    pool.stop()
    store.close()
    return 1 if pool.fatal else 0
