"""A grading worker's heartbeat: a daemon thread that marks the worker's running submissions alive
every ``HEARTBEAT_S`` (``Store.beat``), on a connection of its own. A worker that is killed, or
whose host is gone or cut off from the database, stops beating; any other worker's pool (on any
host) then finds its submissions stalled after ``STALL_S`` and retries them once
(``Store.reap_stalled``), and the stale worker, should it come back, stores nothing
(``Store.finish(worker=...)``)."""

from __future__ import annotations

import logging
import threading

from judge.service.store import HEARTBEAT_S, Store

log = logging.getLogger("judge.service.heartbeat")


class Heartbeat:
    def __init__(self, store: Store, worker: str, interval: float = HEARTBEAT_S):
        self.store, self.worker, self.interval = store, worker, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{worker}", daemon=True)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.store.beat(self.worker)
            except Exception:  # noqa: BLE001 - the database is away: beat again when it is back
                log.warning("heartbeat of %s failed; retrying", self.worker, exc_info=True)
                self.store.close()  # a fresh connection next time (psycopg's may be broken)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 1)
