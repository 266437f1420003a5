"""The store on both backends (SQLite, PostgreSQL: the ``database_url`` fixture): durable
submissions, isolation by client, atomic claims, fair share, recovery, migrations."""

from __future__ import annotations

import json
import threading
import time

import pytest

from judge.service import migrate
from judge.service.store import ACTIVE_S, MAX_ATTEMPTS, STALL_S, QueueFull, Store


@pytest.fixture
def store(database_url):
    return Store(database_url)


def add(store, client="a", code="x = 1", queue_max=1000, client_max=None):
    return store.add(client, "glm5_mis", "submit", code, queue_max=queue_max, client_max=client_max)


def full(store, **kw) -> QueueFull:
    with pytest.raises(QueueFull) as e:
        add(store, **kw)
    return e.value


def test_schema_is_at_the_migrations_head(store, database_url):
    assert migrate.HEAD == migrate.script_head()
    assert migrate.current(store.db, store.backend.name) == migrate.HEAD
    Store(database_url)  # opening an existing database again is harmless
    if store.backend.name == "sqlite":
        assert store.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_database_made_before_migrations_is_taken_over(tmp_path):
    """A SQLite file made by the schema script of old (no alembic_version) keeps its rows."""
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE submissions (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL "
                     "UNIQUE, client TEXT NOT NULL, exercise TEXT NOT NULL, mode TEXT NOT NULL, code TEXT "
                     "NOT NULL, status TEXT NOT NULL DEFAULT 'queued', attempts INTEGER NOT NULL DEFAULT 0, "
                     "worker TEXT, verdict TEXT, outcome TEXT, message TEXT, created_at REAL NOT NULL, "
                     "started_at REAL, finished_at REAL);"
                     "INSERT INTO submissions (id, client, exercise, mode, code, created_at) "
                     "VALUES ('old', 'a', 'glm5_mis', 'submit', 'x = 1', 1.0);")
    db.close()
    store = Store(path)
    assert store.get("old", "a")["status"] == "queued"
    assert store.claim("w").id == "old"


def test_concurrent_openers_migrate_once(database_url):
    """Processes opening a fresh database at once (an API and its workers): one migrates, the
    others wait for it, and all see the head."""
    stores: list = []
    threads = [threading.Thread(target=lambda: stores.append(Store(database_url))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stores) == 4
    assert all(migrate.current(s.db, s.backend.name) == migrate.HEAD for s in stores)


def test_add_is_committed_and_visible_to_its_client_only(store, database_url):
    sid = add(store, client="alice")
    other = Store(database_url)  # another connection sees it at once: committed
    row = other.get(sid, "alice")
    assert row["status"] == "queued" and row["attempts"] == 0 and row["exercise"] == "glm5_mis"
    assert other.get(sid, "bob") is None
    assert other.get(sid, None)["id"] == sid
    assert [e["kind"] for e in other.events(sid)] == ["status"]


def test_queue_is_bounded(store):
    assert add(store, queue_max=2) and add(store, queue_max=2)
    e = full(store, queue_max=2)
    assert (e.scope, e.limit) == ("queue", 2)
    job = store.claim("w")
    assert full(store, queue_max=2).scope == "queue"  # running counts too
    store.finish(job.id, "{}", "accepted")
    assert add(store, queue_max=2) is not None
    assert store.execute("SELECT count(*) FROM submissions").fetchone()[0] == 3


def test_one_client_cannot_fill_the_queue(store):
    mine = [add(store, client="a", client_max=2) for _ in range(2)]
    e = full(store, client="a", client_max=2)
    assert (e.scope, e.limit) == ("client", 2)
    assert add(store, client="b", client_max=2)  # another client's room is its own
    job = store.claim("w")
    assert job.id == mine[0]
    assert full(store, client="a", client_max=2).scope == "client"  # running counts too
    store.finish(job.id, "{}", "accepted")
    assert add(store, client="a", client_max=2)


def test_claim_marks_running_oldest_first_within_a_client(store):
    ids = [add(store) for _ in range(3)]
    job = store.claim("w1")
    assert job.id == ids[0] and job.attempts == 1 and job.code == "x = 1"
    row = store.get(ids[0], None)
    assert row["status"] == "running" and row["worker"] == "w1" and row["started_at"]
    assert store.claim("w2").id == ids[1]


def client_of(store, job) -> str:
    return store.execute("SELECT client FROM submissions WHERE id = ?", (job.id,)).fetchone()[0]


def test_a_backlog_does_not_make_another_client_wait_behind_it(store):
    """Client a queues 50, then b queues one: with one worker, b's is the very next claimed."""
    a = [add(store, client="a") for _ in range(50)]
    first = store.claim("w")
    assert first.id == a[0]
    b = add(store, client="b")
    store.finish(first.id, "{}", "accepted")
    assert store.claim("w").id == b
    assert store.claim("w").id == a[1]  # then a's backlog, in order


def test_clients_take_turns(store):
    """Round robin: with two backlogs queued one after the other, claims alternate."""
    for c in "aaaa" + "bbbb" + "cc":
        add(store, client=c)
    order = []
    while (job := store.claim("w")) is not None:
        order.append(client_of(store, job))
        store.finish(job.id, "{}", "accepted")
    assert order == list("abcabcabab")


def test_a_client_with_fewer_running_goes_first(store):
    """Two workers busy with a's submissions: a free worker takes b's, though b was served last."""
    for _ in range(4):
        add(store, client="a")
    b = add(store, client="b")
    assert client_of(store, store.claim("w1")) == "a"
    assert store.claim("w2").id == b  # a has one running, b none
    b2 = add(store, client="b")
    done = store.claim("w2")  # b's is running, a has one running: a, served longer ago
    assert client_of(store, done) == "a"
    store.finish(b, "{}", "accepted")
    assert store.claim("w3").id == b2  # b has none running now, a has two


def test_share_leaves_a_worker_for_an_active_client(store, monkeypatch):
    """share=1 (2 workers): while b is active, a holds at most one grading; the other worker
    stays free for b's next submission. A lone client, or once b is idle, gets every worker."""
    for _ in range(5):
        add(store, client="a")
    assert store.claim("w1", share=1) and store.claim("w2", share=1)  # a alone: both workers
    running = [r["id"] for r in store.execute("SELECT id FROM submissions WHERE status = 'running'")]
    b = add(store, client="b")
    store.finish(running[0], "{}", "accepted")
    assert store.claim("w1", share=1).id == b  # b first: fewer running
    store.finish(running[1], "{}", "accepted")
    assert client_of(store, store.claim("w2", share=1)) == "a"  # b is running: a may hold one
    assert store.claim("w3", share=1) is None  # not two while b is active (b is running)
    store.finish(b, "{}", "accepted")
    assert store.claim("w3", share=1) is None  # b was served in the last ACTIVE_S: still active
    assert client_of(store, store.claim("w3")) == "a"  # no share: every worker
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + ACTIVE_S + 1)
    assert client_of(store, store.claim("w4", share=1)) == "a"  # b went quiet: a gets the rest


def test_a_retried_submission_keeps_its_clients_turn(store):
    a1, a2 = add(store, client="a"), add(store, client="a")
    b1 = add(store, client="b")
    assert store.claim("w").id == a1
    assert store.recover("w", message="died") == {a1: "queued"}
    assert store.claim("w").id == b1  # a was served last
    assert store.claim("w").id == a1  # then a's oldest: the retried one, before a2
    assert store.claim("w").id == a2


def test_concurrent_claims_never_share_a_job(store, database_url):
    ids = {add(store) for _ in range(200)}
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(n):
        mine = Store(database_url, synchronous="NORMAL")
        while (job := mine.claim(f"w{n}")) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(ids)


def test_finish_and_fail(store):
    a, b = add(store), add(store)
    store.claim("w")
    store.finish(a, json.dumps({"verdict": "accepted"}), "accepted")
    row = store.get(a, None)
    assert row["status"] == "done" and row["outcome"] == "accepted" and row["finished_at"] and row["worker"] is None
    store.claim("w")
    store.fail(b, "unknown exercise")
    assert store.get(b, None)["status"] == "error" and store.get(b, None)["message"] == "unknown exercise"


def test_recovery_retries_once_then_errors(store):
    sid = add(store)
    store.claim("w")
    assert store.recover(message="the service stopped") == {sid: "queued"}
    assert store.get(sid, None)["status"] == "queued"
    assert store.claim("w").attempts == MAX_ATTEMPTS
    assert store.recover(message="the service stopped") == {sid: "error"}
    row = store.get(sid, None)
    assert row["status"] == "error" and "retried once" in row["message"]
    assert store.recover(message="again") == {}


def test_recovery_of_one_worker_leaves_the_others(store):
    a, b = add(store), add(store)
    store.claim("w1")
    store.claim("w2")
    assert store.recover("w1", message="died") == {a: "queued"}
    assert store.get(b, None)["status"] == "running"


def test_release_does_not_count_an_attempt(store):
    sid = add(store)
    store.claim("w")
    store.release(sid)
    row = store.get(sid, None)
    assert row["status"] == "queued" and row["attempts"] == 0


def test_events_and_change_counter(store):
    sid = add(store)
    before = store.last_change()
    store.claim("w")
    store.progress(sid, {"tier": "T0", "name": "t", "status": "passed"})
    store.finish(sid, "{}", "rejected")
    events = store.events(sid)
    assert [e["kind"] for e in events] == ["status", "status", "test", "status"]
    assert json.loads(events[2]["data"])["tier"] == "T0"
    assert store.events(sid, after=events[1]["id"])[0]["kind"] == "test"
    assert store.last_change() == events[-1]["id"] > before


def test_list_is_newest_first_and_paginated(store):
    mine = [add(store, client="a") for _ in range(5)]
    theirs = add(store, client="b")
    page = store.list("a", limit=3)
    assert [r["id"] for r in page] == mine[::-1][:3]
    assert "seq" not in page[0]  # the global position never leaves the store
    rest = store.list("a", limit=3, after=page[-1]["id"])
    assert [r["id"] for r in rest] == mine[::-1][3:]
    assert store.list("a", limit=3, after=theirs) is None  # not a position in a's list
    assert store.list("a", limit=3, after="f" * 24) is None


def test_event_positions_are_per_submission(store):
    a, b = add(store, client="a"), add(store, client="b")
    store.claim("w")
    store.progress(a, {"tier": "T0"})
    store.progress(b, {"tier": "T0"})
    store.progress(a, {"tier": "T1"})
    ids = [e["id"] for e in store.events(a)]
    assert len(ids) == 4  # queued, running, T0, T1
    assert store.resume_point(a, 0) == (0, 0)
    assert [store.resume_point(a, n) for n in (1, 2, 3, 4)] == [(i, n) for n, i in enumerate(ids, 1)]
    assert store.resume_point(a, 5) == store.resume_point(a, 10**9) == (ids[-1], 4)  # past the end
    after, _ = store.resume_point(a, 2)
    assert [e["id"] for e in store.events(a, after=after)] == ids[2:]


def test_metrics(store):
    a, b, _ = add(store), add(store), add(store)
    store.claim("w")
    store.finish(a, "{}", "accepted")
    store.claim("w")
    store.finish(b, "{}", "rejected")
    m = store.metrics()
    assert m["by_status"] == {"done": 2, "queued": 1}
    assert m["by_outcome"] == {"accepted": 1, "rejected": 1}
    assert m["latency"]["count"] == 2 and m["latency"]["buckets"][-1][1] == 2


def test_a_stalled_grading_is_retried_once_then_errors(store, monkeypatch):
    """A worker that stops beating (killed, host gone) loses its grading after STALL_S: retried
    once, then error with a message; one that beats keeps it."""
    sid, other = add(store), add(store)
    store.claim("dead")
    store.claim("alive")
    assert store.reap_stalled() == {}  # both just claimed
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + STALL_S + 1)
    assert store.beat("alive") == 1
    assert store.reap_stalled() == {sid: "queued"}
    assert store.get(other, None)["status"] == "running"  # its worker beats
    assert store.claim("dead2").id == sid
    monkeypatch.setattr(time, "time", lambda: real() + 2 * (STALL_S + 1))
    store.beat("alive")
    assert store.reap_stalled() == {sid: "error"}
    row = store.get(sid, None)
    assert row["status"] == "error" and "no heartbeat" in row["message"] and "retried once" in row["message"]


def test_a_stale_worker_never_completes_a_grading_twice(store, monkeypatch):
    """Worker w1 is cut off and declared stalled; w2 grades the retry. When w1 comes back, its
    verdict and its artifacts are refused: one completion, w2's."""
    sid = add(store)
    store.claim("w1")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + STALL_S + 1)
    assert store.reap_stalled() == {sid: "queued"}
    assert store.claim("w2").id == sid
    assert store.finish(sid, '{"by": "w1"}', "rejected", worker="w1") is False  # w1 is back: too late
    assert store.retry_or_fail(sid, "w1's grading failed", worker="w1") == "gone"  # w2's stays running
    assert store.get(sid, None)["status"] == "running"
    assert store.finish(sid, '{"by": "w2"}', "accepted", worker="w2") is True
    assert store.finish(sid, '{"by": "w1"}', "rejected", worker="w1") is False
    assert store.add_artifacts(sid, '{"by": "w1", "artifacts": 1}', worker="w1") is False
    assert store.add_artifacts(sid, '{"by": "w2", "artifacts": 1}', worker="w2") is True
    assert store.retry_or_fail(sid, "w1's sandbox died", worker="w1") == "gone"
    row = store.get(sid, None)
    assert (row["outcome"], json.loads(row["verdict"])) == ("accepted", {"by": "w2", "artifacts": 1})
    assert [json.loads(e["data"])["status"] for e in store.events(sid) if e["kind"] == "status"].count("done") == 1


def test_a_queued_submission_is_heard_on_every_host(store, database_url):
    """PostgreSQL: LISTEN hears each queued submission (and each retry) at its commit, from
    another connection; SQLite: one host, nothing to hear, and ``listen`` returns on stop."""
    heard: list[str] = []
    stop = threading.Event()
    listener = threading.Thread(target=Store(database_url).listen, args=(heard.append, stop))
    listener.start()
    time.sleep(0.5)  # LISTEN is in place
    sid = add(store)
    store.claim("w")
    store.retry_or_fail(sid, "interrupted")
    deadline = time.monotonic() + 5
    while store.backend.name == "postgresql" and len(heard) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    listener.join(5)
    assert not listener.is_alive()
    assert heard == ([sid, sid] if store.backend.name == "postgresql" else [])


def test_changes_are_heard_by_every_api_node(store, database_url):
    """PostgreSQL: each committed change NOTIFYs its submission's id ("s": state, "e": events
    only), heard on another connection; one notification per submission per transaction.
    SQLite: nothing (the pool's pipe tells the API on one host)."""
    heard: list[tuple[str, str]] = []
    stop = threading.Event()
    listener = threading.Thread(target=Store(database_url).listen_changes,
                                args=(lambda kind, sid: heard.append((kind, sid)), stop))
    listener.start()
    time.sleep(0.5)
    sid = add(store)
    store.claim("w")
    store.progress_batch([(sid, time.time(), {"tier": "T0"}), (sid, time.time(), {"tier": "T1"})])
    store.finish(sid, "{}", "accepted")
    deadline = time.monotonic() + 5
    while store.backend.name == "postgresql" and len(heard) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    listener.join(5)
    expected = [("s", sid), ("e", sid), ("e", sid), ("s", sid)]  # queued, running, tests, done
    assert heard == (expected if store.backend.name == "postgresql" else [])


def test_runs_go_before_a_backlog_of_submits(store):
    """Separate lanes: a Run queued behind 20 Submits (its own client's and another's) is the
    next claimed; the Submits then keep their fair-share order."""
    subs = [add(store, client=c) for c in "ab" * 10]
    run = store.add("a", "glm5_mis", "run", "x = 1", queue_max=1000)
    assert store.claim("w").id == run
    store.finish(run, "{}", "accepted")
    # a was served last: b's oldest, then a's, each client's in order
    assert [store.claim("w").id for _ in range(4)] == [subs[1], subs[0], subs[3], subs[2]]


def test_a_claim_of_one_mode_takes_only_that_mode_by_fair_share(store):
    """What a Procrastinate ticket of queue "run" or "submit" claims (judge.service.dispatch): the
    fair-share next submission of its mode only, whatever else is older."""
    subs = [store.add("a", "glm5_mis", "submit", "x", queue_max=100) for _ in range(3)]
    run_a = store.add("a", "glm5_mis", "run", "x", queue_max=100)
    run_b = store.add("b", "glm5_mis", "run", "x", queue_max=100)
    sub_b = store.add("b", "glm5_mis", "submit", "x", queue_max=100)
    assert store.claim("w1", mode="submit").id == subs[0]  # a's oldest Submit (runs are another queue)
    assert store.claim("w2", mode="run").id == run_b  # a holds one running: b's Run first
    assert store.claim("w3", mode="run").id == run_a
    assert store.claim("w4", mode="run") is None and not store.has_queued("run")
    assert store.has_queued("submit")
    assert store.claim("w5", mode="submit").id == sub_b  # b has none running now, a has two


def test_both_ends_of_a_session_probe_a_silent_peer(postgres):
    """The server's end of each store session ends an idle transaction and probes a silent
    client (keepalives, user timeout), whatever the server's own defaults: a host cut off holding
    the write lock loses it in seconds even if the idle timeout never fires."""
    store = Store(postgres.fresh_database())
    got = {name: store.db.execute(f"SHOW {name}").fetchone()[0] for name in (
        "idle_in_transaction_session_timeout", "tcp_keepalives_idle", "tcp_keepalives_interval",
        "tcp_keepalives_count", "tcp_user_timeout")}
    assert got == {"idle_in_transaction_session_timeout": "5s", "tcp_keepalives_idle": "5",
                   "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3",
                   "tcp_user_timeout": "10000"}, got


def test_a_write_transaction_left_idle_gives_up_the_write_lock(postgres):
    """A host cut off the network inside a write transaction (tests/test_netns_hosts.py's link
    cut) must not keep every other host's writes waiting until TCP gives up: the server ends a
    transaction of ours left idle (store_pg.LINK), its write lock with it, and the silent
    client's next statement fails (its store then connects anew)."""
    import psycopg

    url = postgres.fresh_database()
    silent, other = Store(url), Store(url)
    inside, release, failed = threading.Event(), threading.Event(), []

    def hold() -> None:
        try:
            with silent.backend.write() as db:
                inside.set()
                release.wait(120)  # what a cut-off host does inside its transaction: nothing
                db.execute("SELECT 1")
        except psycopg.Error as e:
            failed.append(e)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert inside.wait(30)
    writer = threading.Thread(target=add, args=(other,), daemon=True)
    writer.start()
    writer.join(90)
    try:
        assert not writer.is_alive(), "a write waited on an idle transaction's lock"
    finally:
        release.set()
        holder.join(30)
    assert failed and "idle" in str(failed[0]).lower(), failed
    assert silent.status(add(silent)) == "queued"  # the silent host's store works again
