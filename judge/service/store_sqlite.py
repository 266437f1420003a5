"""The store's SQLite backend: one file in WAL mode, one connection per thread, writes under
SQLite's write lock (``BEGIN IMMEDIATE``), so claims and quota checks are serial."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from judge.service import migrate


class SqliteBackend:
    name = "sqlite"
    errors = sqlite3.Error

    def __init__(self, path: Path, synchronous: str):
        self.path, self.synchronous = Path(path), synchronous
        self._local = threading.local()
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            _set_wal(db)
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    @contextmanager
    def write(self, *, relaxed: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``relaxed``: its commit skips the fsync (WAL: the next
        synchronous commit makes it durable with it)."""
        db = self.connection()
        relax = relaxed and self.synchronous.upper() not in ("OFF", "NORMAL")
        if relax:
            db.execute("PRAGMA synchronous=OFF")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            if relax:
                db.execute(f"PRAGMA synchronous={self.synchronous}")

    def queued(self, db: sqlite3.Connection, sid: str) -> None:
        """One host: the API wakes its own workers (``WorkerPool.notify``)."""

    def ticket(self, db: sqlite3.Connection, mode: str) -> None:
        """No dispatch queue on one host: the workers look at the store."""

    def missing_tickets(self, db: sqlite3.Connection) -> dict[str, int]:
        return {}

    def reconcile(self, db: sqlite3.Connection) -> dict[str, int]:
        return {}

    def changed(self, db: sqlite3.Connection, sid: str, kind: str) -> None:
        """One host: the workers tell the API through the pool's pipe (``notify_change``)."""

    def listen(self, on_queued, stop, channel: str = "queued") -> None:
        """Nothing to hear on one host: idle workers also look at the queue every poll."""
        stop.wait()

    def migrate(self) -> None:
        """Bring the schema to ``migrate.HEAD`` (Alembic), once: other processes opening the same
        file wait on a lock of its directory (never of the file: SQLite's own locks are there)."""
        if migrate.current(self.connection(), self.name) == migrate.HEAD:
            return
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if migrate.current(self.connection(), self.name) != migrate.HEAD:
                migrate.upgrade(self.url)
        finally:
            os.close(fd)


def _set_wal(db: sqlite3.Connection, timeout: float = 30.0) -> None:
    """``PRAGMA journal_mode=WAL``, waiting for other openers: on a fresh file that another
    connection is creating at the same moment, SQLite answers "database is locked" at once
    (its busy handler does not cover the journal-mode change), so retry within ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
