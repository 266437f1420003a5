"""The service's durable state, shared by the API and the workers: one SQLite file (WAL mode,
the embedded default) or a PostgreSQL database (``JUDGE_DATABASE_URL=postgresql://…``, any
number of API and worker hosts). ``Store`` is the one interface; its queries are written once,
for both, and ``store_sqlite``/``store_pg`` hold what differs (connections, the write
transaction, migrations). The schema is in ``migrations/`` (Alembic), brought to its head when a
store opens a database.

``submissions`` holds each submission (the client is a hash of its key, never the key) and, once
graded, its ``Verdict`` document as JSON. ``events`` holds tier progress and status changes, in
order; its largest id is the change counter the API polls as a fallback to the workers'
notifications. A worker claims a submission with one ``UPDATE … RETURNING`` under the write
lock (SQLite's, or on PostgreSQL one advisory lock every write transaction holds), so no two workers get the same; which one is a fair share across clients (``claim``):
the oldest queued submission of the client with the fewest running, served least recently
(``turns``), so one client's backlog never makes another's submission wait behind it. On
PostgreSQL every transaction that queues a submission also defers its Procrastinate job, a
ticket for its mode (``backend.queued``, ``judge.service.dispatch``): a ticket's worker claims
by the same fair share, within that mode (``claim(mode=...)``).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

MAX_ATTEMPTS = 2  # a submission whose grading was interrupted is retried once
HEARTBEAT_S = 2.0  # a grading worker says it is alive this often (judge.service.heartbeat)
STALL_S = 10.0  # a running submission without a heartbeat this long is stalled (``reap_stalled``)
ACTIVE_S = 60.0  # a client served this recently still counts as active (``claim``'s share)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

_COLUMNS = ("seq, id, client, exercise, mode, status, attempts, worker, verdict, outcome, message, "
            "created_at, started_at, finished_at")


# The next submission to grade (``Store.claim``): Runs before Submits (a backlog of Submits never
# delays a Run), then each client's oldest queued one of that mode, ranked by the client's
# running count, then by when it was last served (never: first), then by age; a client already holding ``share`` gradings
# is passed over while another client is active (has one queued or running, or was served
# since ``since``).
_NEXT = """
WITH heads AS (SELECT client, mode, min(seq) AS seq FROM submissions WHERE status = 'queued'{mode}
               GROUP BY client, mode),
     running AS (SELECT client, count(*) AS n FROM submissions WHERE status = 'running' GROUP BY client)
SELECT heads.seq FROM heads LEFT JOIN running ON running.client = heads.client
LEFT JOIN turns ON turns.client = heads.client
WHERE coalesce(running.n, 0) < :share
   OR NOT (EXISTS (SELECT 1 FROM heads o WHERE o.client != heads.client)
           OR EXISTS (SELECT 1 FROM running o WHERE o.client != heads.client)
           OR EXISTS (SELECT 1 FROM turns o WHERE o.client != heads.client AND o.at > :since))
ORDER BY CASE WHEN heads.mode = 'run' THEN 0 ELSE 1 END, coalesce(running.n, 0),
         coalesce(turns.served, 0), heads.seq LIMIT 1
"""
# the same, among one mode's submissions (a Procrastinate ticket of that mode: judge.service.dispatch)
_NEXT_OF = {None: _NEXT.format(mode=""), "run": _NEXT.format(mode=" AND mode = 'run'"),
            "submit": _NEXT.format(mode=" AND mode = 'submit'")}


class QueueFull(Exception):
    """``Store.add`` refused a submission: ``scope`` "queue" (everyone's) or "client" (the
    client's own) already holds ``limit`` queued or running."""

    def __init__(self, scope: str, limit: int):
        super().__init__(f"{scope} queue full ({limit})")
        self.scope, self.limit = scope, limit


@dataclass
class ClaimedSubmission:
    """A claimed submission, as a worker sees it (not ``judge.box.job.Job``, the sandboxed child
    that grades it)."""
    id: str
    exercise: str
    mode: str
    code: str
    attempts: int


def new_id() -> str:
    return secrets.token_hex(12)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class Store:
    """Thread-safe: each thread gets its own connection.

    ``target``: a SQLite file's path, a ``sqlite:///PATH`` URL or a ``postgresql://`` URL.
    ``synchronous``: SQLite's fsync level (PostgreSQL always commits durably, but progress)."""

    def __init__(self, target: Path | str, *, synchronous: str = "FULL"):
        target = str(target)
        if is_postgres(target):
            from judge.service.store_pg import PostgresBackend

            self.backend = PostgresBackend(target)
            self.path = None
        else:
            from judge.service.store_sqlite import SqliteBackend

            self.path = Path(target[len("sqlite:///"):] if target.startswith("sqlite:///") else target)
            self.backend = SqliteBackend(self.path, synchronous)
        self.synchronous = synchronous
        self.errors = self.backend.errors  # what a failed query raises (sqlite3.Error, psycopg.Error)
        self.backend.migrate()

    @property
    def db(self):
        """This thread's connection (``execute`` takes the queries as written here)."""
        return self.backend.connection()

    def execute(self, sql: str, params=()):
        """A query outside the methods below (tools, tests), on this thread's connection."""
        return self.db.execute(sql, params)

    def close(self) -> None:
        self.backend.close()

    def write(self, *, relaxed: bool = False):
        """One write transaction, serial with every other writer's (see the module)."""
        return self.backend.write(relaxed=relaxed)

    def _event(self, db, sid: str, kind: str, data: dict) -> None:
        db.execute("INSERT INTO events (submission, at, kind, data) VALUES (?, ?, ?, ?)",
                   (sid, time.time(), kind, json.dumps(data)))
        self.backend.changed(db, sid, "e" if data.get("status") == "running" else "s")

    # --- the API's side ---------------------------------------------------------------------
    def add(self, client: str, exercise: str, mode: str, code: str, *, queue_max: int,
            client_max: int | None = None) -> str:
        """Commit a new queued submission. Raises ``QueueFull`` when ``queue_max`` are already
        waiting or running (``scope`` "queue"), or ``client_max`` of this client's are."""
        sid = new_id()
        with self.write() as db:
            if client_max is not None and db.execute(
                    "SELECT count(*) FROM submissions WHERE status IN ('queued', 'running') "
                    "AND client = ?", (client,)).fetchone()[0] >= client_max:
                raise QueueFull("client", client_max)
            cur = db.execute(
                "INSERT INTO submissions (id, client, exercise, mode, code, created_at) "
                "SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM submissions "
                "WHERE status IN ('queued', 'running')) < ?",
                (sid, client, exercise, mode, code, time.time(), queue_max))
            if cur.rowcount != 1:
                raise QueueFull("queue", queue_max)
            self._event(db, sid, "status", {"status": "queued"})
            self.backend.queued(db, sid)
        return sid

    def get(self, sid: str, client: str | None) -> dict | None:
        """One submission; ``client`` set: only if it is that client's (else None, like a miss)."""
        if client is None:
            row = self.db.execute(f"SELECT {_COLUMNS} FROM submissions WHERE id = ?", (sid,)).fetchone()
        else:
            row = self.db.execute(f"SELECT {_COLUMNS} FROM submissions WHERE id = ? AND client = ?",
                                  (sid, client)).fetchone()
        return dict(row) if row else None

    def status(self, sid: str) -> str | None:
        """Only a submission's status (a tiny read, fit for the event loop), or None."""
        row = self.db.execute("SELECT status FROM submissions WHERE id = ?", (sid,)).fetchone()
        return row[0] if row else None

    def list(self, client: str, *, limit: int, after: str | None = None) -> list[dict] | None:
        """The client's submissions, newest first; ``after``: continue below that submission of
        the client's (its id: the position is the client's own, nothing global). None when
        ``after`` is not one of the client's submissions."""
        db = self.db
        before = 2**62
        if after is not None:
            row = db.execute("SELECT seq FROM submissions WHERE id = ? AND client = ?",
                             (after, client)).fetchone()
            if row is None:
                return None
            before = row["seq"]
        rows = db.execute(
            "SELECT id, exercise, mode, status, outcome, created_at, finished_at FROM submissions "
            "WHERE client = ? AND seq < ? ORDER BY seq DESC LIMIT ?", (client, before, limit)).fetchall()
        return [dict(r) for r in rows]

    def history(self, client: str, exercise: str, *, limit: int = 100) -> list[dict]:
        """The client's submissions for one exercise, newest first (the learner's page)."""
        rows = self.db.execute(
            "SELECT id, exercise, mode, status, outcome, created_at, finished_at FROM submissions "
            "WHERE client = ? AND exercise = ? ORDER BY seq DESC LIMIT ?", (client, exercise, limit)).fetchall()
        return [dict(r) for r in rows]

    def outcomes(self, client: str) -> dict[str, set[tuple[str, str]]]:
        """exercise -> the (mode, outcome) pairs of the client's graded submissions of it."""
        out: dict[str, set[tuple[str, str]]] = {}
        for ex, mode, outcome in self.db.execute("SELECT DISTINCT exercise, mode, outcome FROM submissions "
                                                 "WHERE client = ? AND status = 'done'", (client,)).fetchall():
            out.setdefault(ex, set()).add((mode, outcome))
        return out

    def code(self, sid: str, client: str) -> str | None:
        """A submission's source, only for the client who sent it (else None, like a miss)."""
        row = self.db.execute("SELECT code FROM submissions WHERE id = ? AND client = ?", (sid, client)).fetchone()
        return row[0] if row else None

    def events(self, sid: str, after: int = 0, limit: int = 500) -> list[dict]:
        rows = self.db.execute("SELECT id, at, kind, data FROM events WHERE submission = ? AND id > ? "
                               "ORDER BY id LIMIT ?", (sid, after, limit)).fetchall()
        return [dict(r) for r in rows]

    def resume_point(self, sid: str, number: int) -> tuple[int, int]:
        """Where a stream that has sent ``number`` of ``sid``'s events resumes: (the events
        table's id of the ``number``-th, ``number``), or past the last one when there are fewer.
        Streams number their events per submission (1, 2, …), so a client never sees the
        global counter, which moves with everyone's gradings."""
        if number > 0:
            row = self.db.execute("SELECT id FROM events WHERE submission = ? ORDER BY id "
                                  "LIMIT 1 OFFSET ?", (sid, number - 1)).fetchone()
            if row is not None:
                return row["id"], number
            row = self.db.execute("SELECT coalesce(max(id), 0), count(*) FROM events WHERE submission = ?",
                                  (sid,)).fetchone()
            return row[0], row[1]
        return 0, 0

    def last_change(self) -> int:
        return self.db.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]

    def ping(self) -> bool:
        return self.db.execute("SELECT 1").fetchone()[0] == 1

    # --- the workers' side ------------------------------------------------------------------
    def has_queued(self, mode: str | None = None) -> bool:
        """Any submission queued (of ``mode``, when given)."""
        if mode is None:
            return self.db.execute("SELECT 1 FROM submissions WHERE status = 'queued' LIMIT 1").fetchone() is not None
        return self.db.execute("SELECT 1 FROM submissions WHERE status = 'queued' AND mode = ? LIMIT 1",
                               (mode,)).fetchone() is not None

    def claim(self, worker: str, share: int | None = None, mode: str | None = None, *,
              look_first: bool = True) -> ClaimedSubmission | None:
        """Atomically take the next queued submission, by fair share, and mark it running.

        Fair share: among the clients with a submission queued, the one with the fewest running
        now, then the one a worker served least recently (``turns``); its oldest queued
        submission. So clients take turns (round robin), and a client's backlog, however long or
        slow, delays another's submission by at most the gradings already running. ``share``:
        the most gradings one client may hold while another client is active (queued, running,
        or served in the last ``ACTIVE_S`` seconds), so that with ``share`` = workers - 1 a
        worker stays free for the others' next submission instead of taking more of a backlog
        (None: no cap; a lone client always has every worker). ``mode``: only a submission of
        that mode ("run" or "submit": what a Procrastinate ticket of that queue claims).
        ``look_first``: a cheap read before the write lock, so idle pollers never take it (a
        ticket, which nearly always finds its submission queued, goes straight to the claim)."""
        if look_first and not self.has_queued(mode):
            return None
        now = time.time()
        with self.write() as db:
            row = db.execute(_NEXT_OF[mode], {"share": share if share is not None else 2**62,
                                     "since": now - ACTIVE_S}).fetchone()
            if row is None:
                return None
            row = db.execute(
                "UPDATE submissions SET status = 'running', attempts = attempts + 1, worker = ?, "
                "started_at = ?, heartbeat = ? WHERE seq = ? RETURNING id, client, exercise, mode, code, attempts",
                (worker, now, now, row["seq"])).fetchone()
            db.execute("INSERT INTO turns (client, served, at) VALUES (?, (SELECT coalesce(max(served), 0) "
                       "+ 1 FROM turns), ?) ON CONFLICT (client) DO UPDATE SET served = excluded.served, "
                       "at = excluded.at", (row["client"], now))
            self._event(db, row["id"], "status", {"status": "running", "attempt": row["attempts"]})
        return ClaimedSubmission(row["id"], row["exercise"], row["mode"], row["code"], row["attempts"])

    def progress(self, sid: str, data: dict) -> None:
        self.progress_batch([(sid, time.time(), data)])

    def progress_batch(self, items: list[tuple[str, float, dict]]) -> None:
        """Test results ``(submission, at, data)``, in order, in one transaction. Progress is
        advisory: its commit does not wait for the disk (the next state change syncs the log)."""
        with self.write(relaxed=True) as db:
            self._tests(db, items)

    def _tests(self, db, items: list[tuple[str, float, dict]]) -> None:
        db.executemany("INSERT INTO events (submission, at, kind, data) VALUES (?, ?, 'test', ?)",
                       [(sid, at, json.dumps(data)) for sid, at, data in items])
        for sid in dict.fromkeys(sid for sid, _, _ in items):
            self.backend.changed(db, sid, "e")

    def finish(self, sid: str, verdict_json: str, outcome: str,
               tests: list[tuple[str, float, dict]] = (), *, worker: str | None = None) -> bool:
        """The verdict, after the test results ``tests`` not written yet (in the same transaction).
        ``worker``: only while that worker still holds the grading (a worker cut off long enough
        to be declared stalled finds it retried elsewhere, and stores nothing). False: not stored."""
        with self.write() as db:
            guard, args = ("", ()) if worker is None else (" AND status = 'running' AND worker = ?", (worker,))
            cur = db.execute("UPDATE submissions SET status = 'done', verdict = ?, outcome = ?, worker = NULL, "
                             "graded_by = ?, finished_at = ? WHERE id = ?" + guard,
                             (verdict_json, outcome, worker, time.time(), sid, *args))
            if cur.rowcount != 1:
                return False
            if tests:
                self._tests(db, tests)
            self._event(db, sid, "status", {"status": "done", "verdict": outcome})
        return True

    def add_artifacts(self, sid: str, verdict_json: str, *, worker: str | None = None) -> bool:
        """The verdict again, now listing the plots drawn after it was first stored (``worker``:
        only if that worker's verdict is the one stored)."""
        with self.write() as db:
            guard, args = ("", ()) if worker is None else (" AND graded_by = ?", (worker,))
            cur = db.execute("UPDATE submissions SET verdict = ? WHERE id = ? AND status = 'done'" + guard,
                             (verdict_json, sid, *args))
            if cur.rowcount != 1:
                return False
            self._event(db, sid, "artifacts", {"ready": True})
        return True

    def listen(self, on_queued, stop) -> None:
        """Block until ``stop`` (a threading.Event) is set, calling ``on_queued(sid)`` whenever a
        submission is queued on any host (PostgreSQL's LISTEN/NOTIFY; nothing on SQLite)."""
        self.backend.listen(on_queued, stop)

    def listen_changes(self, on_change, stop) -> None:
        """Block until ``stop`` is set, calling ``on_change(kind, sid)`` for each change committed
        on any host (PostgreSQL; kinds as in ``notify_change``: "s" state, "e" events only)."""
        self.backend.listen(lambda payload: on_change(payload[:1], payload[1:]), stop, "changes")

    def beat(self, worker: str) -> int:
        """``worker`` is alive: its running submissions' heartbeat is now (one autocommit
        statement, no write lock). How many it holds."""
        return self.db.execute("UPDATE submissions SET heartbeat = ? WHERE status = 'running' AND worker = ?",
                               (time.time(), worker)).rowcount

    def reap_stalled(self, stall_s: float = STALL_S) -> dict[str, str]:
        """Running submissions whose worker has not beaten for ``stall_s`` seconds (killed, its
        host gone or cut off): each is retried once, then marked error (``retry_or_fail``). Any
        host may call it; the write lock makes each submission's fate decided once."""
        rows = self.db.execute("SELECT id FROM submissions WHERE status = 'running' AND "
                               "coalesce(heartbeat, started_at) < ?", (time.time() - stall_s,)).fetchall()
        message = f"its grading worker stopped answering (no heartbeat for {stall_s:.0f} s)"
        out = {}
        for r in rows:
            out[r["id"]] = self.retry_or_fail(r["id"], message, stall_s=stall_s)
        return {k: v for k, v in out.items() if v != "gone"}

    def fail(self, sid: str, message: str) -> None:
        with self.write() as db:
            self._fail(db, sid, message)

    def _fail(self, db, sid: str, message: str) -> None:
        db.execute("UPDATE submissions SET status = 'error', message = ?, worker = NULL, finished_at = ? "
                   "WHERE id = ?", (message, time.time(), sid))
        self._event(db, sid, "status", {"status": "error", "message": message})

    def retry_or_fail(self, sid: str, message: str, *, stall_s: float | None = None,
                      worker: str | None = None) -> str:
        """Grading was interrupted: queue it again if it has an attempt left, else mark it error.
        ``stall_s``: only if it is still without a heartbeat for that long (checked under the lock);
        ``worker``: only if that worker still holds it (not after it was taken back elsewhere)."""
        with self.write() as db:
            if stall_s is None:
                guard, args = ("", ()) if worker is None else (" AND worker = ?", (worker,))
                row = db.execute("SELECT attempts FROM submissions WHERE id = ? AND status = 'running'" + guard,
                                 (sid, *args)).fetchone()
            else:
                row = db.execute("SELECT attempts FROM submissions WHERE id = ? AND status = 'running' "
                                 "AND coalesce(heartbeat, started_at) < ?", (sid, time.time() - stall_s)).fetchone()
            if row is None:
                return "gone"
            if row["attempts"] < MAX_ATTEMPTS:
                db.execute("UPDATE submissions SET status = 'queued', worker = NULL WHERE id = ?", (sid,))
                self._event(db, sid, "status", {"status": "queued", "retry": True})
                self.backend.queued(db, sid)
                return "queued"
            self._fail(db, sid, f"{message}; it was retried once and failed again")
            return "error"

    def recover(self, worker: str | None = None, *, message: str) -> dict[str, str]:
        """Submissions left ``running`` (all of them at start-up, or one dead worker's)."""
        if worker is None:
            rows = self.db.execute("SELECT id FROM submissions WHERE status = 'running'").fetchall()
        else:
            rows = self.db.execute("SELECT id FROM submissions WHERE status = 'running' AND worker = ?",
                                   (worker,)).fetchall()
        return {r["id"]: self.retry_or_fail(r["id"], message) for r in rows}

    def running(self, worker: str | None = None) -> list:
        """The submissions being graded (id, worker, exercise, started_at), or one worker's."""
        sql = "SELECT id, worker, exercise, started_at FROM submissions WHERE status = 'running'"
        if worker is None:
            return self.db.execute(sql).fetchall()
        return self.db.execute(sql + " AND worker = ?", (worker,)).fetchall()

    def release(self, sid: str) -> None:
        """Hand back a claimed submission without counting the attempt (a clean shutdown)."""
        with self.write() as db:
            cur = db.execute("UPDATE submissions SET status = 'queued', worker = NULL, "
                             "attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END WHERE id = ? AND status = 'running'", (sid,))
            if cur.rowcount:
                self._event(db, sid, "status", {"status": "queued"})
                self.backend.queued(db, sid)  # on PostgreSQL: a new ticket, with the row

    def return_ticket(self, mode: str) -> None:
        """A dispatch ticket of ``mode`` given back unused (its host is stopping): another in its
        place, for another host (PostgreSQL; nothing on SQLite)."""
        with self.write() as db:
            self.backend.ticket(db, mode)

    def reconcile_tickets(self) -> dict[str, int]:
        """Tickets missing for queued submissions, deferred now (PostgreSQL's dispatch); mode →
        how many. A safety net: every transaction that queues a submission defers its ticket.
        The write lock is taken only when a first look (a plain read) finds some missing."""
        if not self.backend.missing_tickets(self.db):
            return {}
        with self.write() as db:
            return self.backend.reconcile(db)

    # --- metrics ----------------------------------------------------------------------------
    def metrics(self) -> dict:
        db = self.db
        by_status = dict(db.execute("SELECT status, count(*) FROM submissions GROUP BY status").fetchall())
        by_outcome = dict(db.execute("SELECT outcome, count(*) FROM submissions WHERE status = 'done' "
                                     "GROUP BY outcome").fetchall())
        cases = ", ".join(f"sum(CASE WHEN finished_at - started_at <= {b} THEN 1 ELSE 0 END)"
                          for b in LATENCY_BUCKETS)
        row = db.execute(f"SELECT count(*), coalesce(sum(finished_at - started_at), 0), {cases} "
                         "FROM submissions WHERE status = 'done' AND started_at IS NOT NULL").fetchone()
        count, total, *cum = list(row)
        return {"by_status": by_status, "by_outcome": by_outcome,
                "latency": {"count": count, "sum": total,
                            "buckets": list(zip(LATENCY_BUCKETS, [c or 0 for c in cum]))}}
