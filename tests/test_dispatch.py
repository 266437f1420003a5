"""Dispatch on PostgreSQL (judge/service/dispatch.py): every transaction that queues a submission
defers its Procrastinate ticket on the same connection, so the two commit together or not at
all; tickets go to the queue of their mode; lost tickets are deferred again (``reconcile``)."""

from __future__ import annotations

import pytest

from judge.service import dispatch
from judge.service.store import MAX_ATTEMPTS, Store


@pytest.fixture
def store(postgres):
    return Store(postgres.fresh_database())


def tickets(store, *, status: str = "todo") -> list[tuple[str, int, dict]]:
    return [tuple(r) for r in store.execute(
        "SELECT queue_name, priority, args FROM procrastinate_jobs WHERE task_name = ? AND status = ? "
        "ORDER BY id", (dispatch.TASK, status)).fetchall()]


def test_each_queued_submission_has_its_ticket_on_its_mode_s_queue(store):
    run = store.add("a", "glm5_mis", "run", "x", queue_max=10)
    sub = store.add("b", "glm5_mis", "submit", "x", queue_max=10)
    assert tickets(store) == [("run", 1, {"mode": "run", "submission": run}),
                              ("submit", 0, {"mode": "submit", "submission": sub})]


class Injected(Exception):
    pass


def test_a_failure_after_the_defer_commits_neither_the_row_nor_its_job(store, monkeypatch):
    """The crash between the two: the ticket is deferred, then the transaction fails before its
    commit; the submission and the job are both gone (one transaction)."""
    real = store.backend.queued

    def queued_then_fail(db, sid):
        real(db, sid)
        assert db.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 1  # deferred, in here
        raise Injected

    monkeypatch.setattr(store.backend, "queued", queued_then_fail)
    with pytest.raises(Injected):
        store.add("a", "glm5_mis", "submit", "x", queue_max=10)
    other = Store(store.backend.url)  # another connection: nothing of it was committed
    assert other.execute("SELECT count(*) FROM submissions").fetchone()[0] == 0
    assert other.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 0


def test_a_failed_defer_commits_no_submission(store, monkeypatch):
    """The other way round: the row is inserted, then the defer itself fails in the database
    (a ticket for a queue that cannot exist); the row is not committed either."""
    monkeypatch.setattr(dispatch, "DEFER_FOR", dispatch.DEFER_FOR.replace("s.mode, %s::text", "repeat('q', 200), %s::text"))
    with pytest.raises(store.errors):
        store.add("a", "glm5_mis", "submit", "x", queue_max=10)
    other = Store(store.backend.url)
    assert other.execute("SELECT count(*) FROM submissions").fetchone()[0] == 0
    assert other.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 0


def test_every_way_back_to_the_queue_defers_a_ticket(store):
    """A retry (interrupted grading) and a clean shutdown's release queue the submission again:
    each with a new ticket in the same transaction; an exhausted one (error) gets none."""
    sid = store.add("a", "glm5_mis", "submit", "x", queue_max=10)
    store.execute("DELETE FROM procrastinate_jobs")  # the first ticket was taken and finished
    store.claim("w")
    store.release(sid)
    assert [t[2]["submission"] for t in tickets(store)] == [sid]
    for attempt in range(1, MAX_ATTEMPTS + 1):
        store.execute("DELETE FROM procrastinate_jobs")
        store.claim("w")
        fate = store.retry_or_fail(sid, "the worker died")
        assert fate == ("queued" if attempt < MAX_ATTEMPTS else "error")
        assert len(tickets(store)) == (1 if fate == "queued" else 0)


def test_reconcile_defers_only_the_missing_tickets(store):
    ids = [store.add(c, "glm5_mis", m, "x", queue_max=10) for c, m in
           [("a", "submit"), ("b", "submit"), ("a", "run")]]
    assert store.reconcile_tickets() == {}  # every queued submission has its ticket
    store.execute("DELETE FROM procrastinate_jobs WHERE args->>'submission' IN (?, ?)", (ids[0], ids[2]))
    assert store.reconcile_tickets() == {"submit": 1, "run": 1}
    assert sorted(t[0] for t in tickets(store)) == ["run", "submit", "submit"]
    assert store.reconcile_tickets() == {}
    store.return_ticket("submit")  # a surplus ticket is harmless: nothing is deferred for it
    assert store.reconcile_tickets() == {} and len(tickets(store)) == 4


def test_the_schema_is_applied_once_and_recorded(store, postgres):
    raw = store.db.raw
    assert dispatch.has_schema(raw)
    assert raw.execute("SELECT version FROM judge_dispatch_schema").fetchall() == [(dispatch.procrastinate_version(),)]
    dispatch.ensure_schema(raw)  # again: nothing to do, one record
    assert raw.execute("SELECT count(*) FROM judge_dispatch_schema").fetchone()[0] == 1
    Store(store.backend.url)  # another opener: the schema is there


def test_an_older_procrastinate_s_schema_takes_the_scripts_since_its_version():
    names = [p.name for p in dispatch.scripts_since("3.3.0")]
    assert names and all(n.startswith("03.04.") for n in names) and names == sorted(names)
    assert dispatch.scripts_since(dispatch.procrastinate_version()) == []


def test_a_process_killed_between_the_defer_and_the_commit_leaves_neither(postgres):
    """A real crash at that point: the API process dies (SIGKILL) after the ticket is deferred
    and before the commit; PostgreSQL rolls the transaction back, row and job together."""
    import subprocess
    import sys

    url = postgres.fresh_database()
    Store(url)  # migrated
    code = f"""
import os, signal
from judge.service.store import Store
store = Store({url!r})
real = store.backend.queued
def queued_then_die(db, sid):
    real(db, sid)
    os.kill(os.getpid(), signal.SIGKILL)
store.backend.queued = queued_then_die
store.add("a", "glm5_mis", "submit", "x", queue_max=10)
"""
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == -9
    other = Store(url)
    assert other.execute("SELECT count(*) FROM submissions").fetchone()[0] == 0
    assert other.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 0
