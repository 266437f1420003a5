"""The SQLite store: durable submissions, isolation by client, atomic claims, recovery."""

from __future__ import annotations

import json
import threading

import pytest

from judge.service.store import MAX_ATTEMPTS, Store


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "judge.db")


def add(store, client="a", code="x = 1", queue_max=1000):
    return store.add(client, "glm5_mis", "submit", code, queue_max=queue_max)


def test_wal_and_schema(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    Store(store.path)  # opening an existing database again is harmless


def test_add_is_committed_and_visible_to_its_client_only(store, tmp_path):
    sid = add(store, client="alice")
    other = Store(tmp_path / "judge.db")  # another connection sees it at once: committed
    row = other.get(sid, "alice")
    assert row["status"] == "queued" and row["attempts"] == 0 and row["exercise"] == "glm5_mis"
    assert other.get(sid, "bob") is None
    assert other.get(sid, None)["id"] == sid
    assert [e["kind"] for e in other.events(sid)] == ["status"]


def test_queue_is_bounded(store):
    assert add(store, queue_max=2) and add(store, queue_max=2)
    assert add(store, queue_max=2) is None
    job = store.claim("w")
    assert add(store, queue_max=2) is None  # running counts too
    store.finish(job.id, "{}", "accepted")
    assert add(store, queue_max=2) is not None


def test_claim_is_fifo_and_marks_running(store):
    ids = [add(store) for _ in range(3)]
    job = store.claim("w1")
    assert job.id == ids[0] and job.attempts == 1 and job.code == "x = 1"
    row = store.get(ids[0], None)
    assert row["status"] == "running" and row["worker"] == "w1" and row["started_at"]
    assert store.claim("w2").id == ids[1]


def test_concurrent_claims_never_share_a_job(store, tmp_path):
    ids = {add(store) for _ in range(200)}
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(n):
        mine = Store(tmp_path / "judge.db", synchronous="NORMAL")
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
    add(store, client="b")
    page = store.list("a", limit=3)
    assert [r["id"] for r in page] == mine[::-1][:3]
    rest = store.list("a", limit=3, before=page[-1]["seq"])
    assert [r["id"] for r in rest] == mine[::-1][3:]


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
