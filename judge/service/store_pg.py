"""The store's PostgreSQL backend (psycopg 3): one connection per thread, autocommit with explicit
transactions. Every write transaction first takes one transaction-scoped advisory lock, so
writes are serial as in SQLite: a claim's fair-share pick and the quota checks of ``add`` see a
stable queue, and the events table's ids commit in order (a reader that has seen id N never
later finds a smaller one committed, which ``Last-Event-ID`` replay relies on).

Queries are written once for both backends with SQLite's placeholders (``?``, ``:name``); they
are rewritten for psycopg (``%s``, ``%(name)s``) once each and cached.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from typing import Iterator

import psycopg

from judge.service import dispatch, migrate

WRITE_LOCK = 0x6A756467  # "judg": the advisory lock every write transaction holds
QUEUED_CHANNEL = "judge_queued"  # NOTIFY'd (with the submission's id) when one is queued
CHANGES_CHANNEL = "judge_changes"  # NOTIFY'd "s<id>" (its state changed) or "e<id>" (new events)
MIGRATE_LOCK = WRITE_LOCK + 1
# A host cut off the network inside a write transaction would keep the write lock, and every
# host's writes waiting, until TCP gives up (hours; tests/test_netns_hosts.py): the server ends a
# transaction of ours idle this long (its locks go with it: ours last milliseconds), and each end
# probes a silent peer, so a connection to a vanished host fails in seconds and is made anew.
# The server's end of a session probes too (its GUCs, set per session): a transaction seen
# "idle in transaction" for 300 s with the write lock, its host cut off, froze a run of
# test_netns_hosts once although the idle timeout was set; a dead peer now ends it in ~11 s.
_SERVER_PROBES = ("-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 "
                  "-c tcp_user_timeout=10000")
LINK = {"options": f"-c idle_in_transaction_session_timeout=5000 {_SERVER_PROBES}", "keepalives": 1,
        "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3, "tcp_user_timeout": 10000}
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class Row(tuple):
    """A row by position or by column name, like ``sqlite3.Row`` (``dict(row)`` works)."""

    def __new__(cls, values, index: dict[str, int]):
        row = tuple.__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self):
        return list(self._index)


def _rows(cursor):
    index = {d.name: i for i, d in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


_cache: dict[str, str] = {}


def translate(sql: str) -> str:
    out = _cache.get(sql)
    if out is None:
        out = _NAMED.sub(r"%(\1)s", sql.replace("%", "%%").replace("?", "%s"))
        _cache[sql] = out
    return out


class Connection:
    """A psycopg connection that takes the store's queries as written for SQLite."""

    def __init__(self, url: str):
        self.raw = psycopg.connect(url, autocommit=True, row_factory=_rows, **LINK)

    def execute(self, sql: str, params=()):
        return self.raw.execute(translate(sql), params or None)

    def executemany(self, sql: str, seq) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(translate(sql), seq)

    def close(self) -> None:
        self.raw.close()


class PostgresBackend:
    name = "postgresql"
    errors = psycopg.Error

    def __init__(self, url: str):
        self.url = url
        self._local = threading.local()

    def connection(self) -> Connection:
        db = getattr(self._local, "db", None)
        if db is None or db.raw.closed:
            db = self._local.db = Connection(self.url)
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    @contextmanager
    def write(self, *, relaxed: bool = False) -> Iterator[Connection]:
        """One write transaction, serial with every other (the advisory lock); ``relaxed``: its
        commit does not wait for the WAL flush (progress is advisory)."""
        db = self.connection()
        raw = db.raw
        with raw.transaction():
            raw.execute("SELECT pg_advisory_xact_lock(%s)" if not relaxed else
                        "SELECT pg_advisory_xact_lock(%s), set_config('synchronous_commit', 'off', true)",
                        (WRITE_LOCK,))
            yield db

    def queued(self, db: Connection, sid: str) -> None:
        """Inside the transaction that queues ``sid``: its Procrastinate job (``dispatch``: a
        ticket for its mode, committed with the row or not at all), and a notification for
        whoever LISTENs to the queue (``listen``)."""
        dispatch.defer_for(db.raw, sid)
        db.raw.execute("SELECT pg_notify(%s, %s)", (QUEUED_CHANNEL, sid))

    def ticket(self, db: Connection, mode: str) -> None:
        """One ticket of ``mode`` not tied to a submission (a stopping host gives its back)."""
        dispatch.defer_mode(db.raw, mode)

    def missing_tickets(self, db: Connection) -> dict[str, int]:
        return dispatch.missing(db.raw)

    def reconcile(self, db: Connection) -> dict[str, int]:
        """The tickets missing for queued submissions, deferred now (``dispatch.reconcile``)."""
        return dispatch.reconcile(db.raw)

    def changed(self, db: Connection, sid: str, kind: str) -> None:
        """Inside the transaction that changes ``sid``: API nodes on every host hear of it at its
        commit (the ids only: what changed is read from the tables, so a lost one loses nothing)."""
        db.raw.execute("SELECT pg_notify(%s, %s)", (CHANGES_CHANNEL, kind + sid))

    def listen(self, on_queued, stop, channel: str = "queued") -> None:
        """Call ``on_queued(payload)`` for each notification on ``channel`` ("queued": a
        submission's id, "changes": "s<id>" or "e<id>"), until ``stop`` is set (a connection of
        its own; reconnects after a lost connection)."""
        channel = {"queued": QUEUED_CHANNEL, "changes": CHANGES_CHANNEL}[channel]
        while not stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, **LINK) as conn:
                    conn.execute(f"LISTEN {channel}")
                    while not stop.is_set():
                        for n in conn.notifies(timeout=1.0):
                            on_queued(n.payload)
            except psycopg.Error:
                stop.wait(1.0)

    def migrate(self) -> None:
        """Bring the schema to ``migrate.HEAD`` (Alembic) and Procrastinate's schema to the
        installed version (``dispatch.ensure_schema``), once: concurrent openers wait on a
        session advisory lock."""
        db = self.connection()
        if migrate.current(db, self.name) == migrate.HEAD and dispatch.has_schema(db.raw):
            return
        db.raw.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            if migrate.current(db, self.name) != migrate.HEAD:
                migrate.upgrade(self.url)
            dispatch.ensure_schema(db.raw)
        finally:
            db.raw.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
