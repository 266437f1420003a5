"""The pool of grading workers: it starts them, restarts one that dies mid-grading (its job is
retried), and its slots say which process is in each."""

from __future__ import annotations

import os
import signal
import time

import pytest

from judge.exercise import REPO_ROOT
from judge.service.config import Config
from judge.service.pool import Slot, WorkerPool
from judge.service.store import Store

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()


@pytest.fixture
def cfg(tmp_path):
    return Config(database_url=f"sqlite:///{tmp_path / 'judge.db'}", workers=1, data_dir=tmp_path / "data",
                  exercises=("glm5_mis",))


def test_pool_restarts_a_dead_worker_and_retries_its_job(cfg):
    store = Store(cfg.database_path)
    pool = WorkerPool(cfg, store, {"glm5_mis": 60})
    pool.start()
    try:
        deadline = time.monotonic() + 120
        while pool.ready_count < 1:
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        slow = REF + "\nimport time as _t\n_t.sleep(2)\n"  # still running when its worker is killed
        sid = store.add("a", "glm5_mis", "submit", slow, queue_max=10)
        pool.notify()
        while store.get(sid, None)["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(pool.slots[0].proc.pid, signal.SIGKILL)  # mid-grading
        while (row := store.get(sid, None))["status"] not in ("done", "error"):
            assert time.monotonic() < deadline + 60, row
            time.sleep(0.05)
        assert row["status"] == "done" and row["outcome"] == "accepted" and row["attempts"] == 2
        assert pool.slots[0].generation == 2
    finally:
        pool.stop()
    assert pool.slots[0].proc is None and pool.slots[0].ready is None  # stop() let them go


def test_the_pool_reads_running_submissions_through_the_store(cfg):
    """The overrun watchdog and the shutdown's release ask the store (all SQL is there) for
    what is running, in all or on one worker."""
    store = Store(cfg.database_path)
    a = store.add("a", "glm5_mis", "submit", REF, queue_max=10)
    b = store.add("b", "glm5_mis", "submit", REF, queue_max=10)
    assert store.running() == []
    store.claim("w0.1.1")
    store.claim("w1.1.1")
    rows = {r["id"]: (r["worker"], r["exercise"]) for r in store.running()}
    assert rows == {a: ("w0.1.1", "glm5_mis"), b: ("w1.1.1", "glm5_mis")}
    assert [r["id"] for r in store.running("w1.1.1")] == [b]
    assert all(r["started_at"] for r in store.running())


def test_a_dispatched_pool_grades_on_order_and_survives_a_worker_s_death(cfg):
    """``ask`` (one ticket per call, judge.service.worker_host): the slot's worker grades the
    next submission of the mode; a worker killed mid-order answers None (its grading is taken
    back and retried by the pool), and the restarted worker takes the next order."""
    import threading

    store = Store(cfg.database_path)
    pool = WorkerPool(cfg, store, {"glm5_mis": 60}, dispatched=True)
    pool.start()
    try:
        assert pool.ask(0, "submit") == ("empty", None)  # waits for the worker to be ready
        sid = store.add("a", "glm5_mis", "submit", REF, queue_max=10)
        assert pool.ask(0, "run") == ("empty", None)
        assert pool.ask(0, "submit") == ("graded", sid) and store.get(sid, None)["outcome"] == "accepted"
        slow = store.add("a", "glm5_mis", "submit", REF + "\nimport time as _t\n_t.sleep(2)\n", queue_max=10)
        answer: list = []
        asking = threading.Thread(target=lambda: answer.append(pool.ask(0, "submit")))
        asking.start()
        deadline = time.monotonic() + 60
        while store.get(slow, None)["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(pool.slots[0].proc.pid, signal.SIGKILL)
        asking.join(30)
        assert answer == [None]
        deadline = time.monotonic() + 30
        while store.get(slow, None)["status"] != "queued":  # taken back by the pool: retried
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert pool.ask(0, "submit") == ("graded", slow) and pool.slots[0].generation == 2
        assert store.get(slow, None)["attempts"] == 2 and store.get(slow, None)["status"] == "done"
    finally:
        pool.stop()
    assert pool.slots[0].orders is None


def test_a_worker_that_keeps_dying_at_start_up_is_restarted_ever_later(tmp_path):
    """A host cut off from its database: each worker dies while starting (no connection); its slot
    waits 2 s, 4 s, 8 s … (at most RESPAWN_MAX_S) between starts instead of spinning fresh
    zygotes, and a worker that dies while grading (alive past START_GRACE_S) restarts at once."""
    from judge.service.pool import RESPAWN_MAX_S, START_GRACE_S

    slot = Slot(0)
    delays = []
    for _ in range(7):
        slot.started = time.monotonic()  # died right after its start
        delays.append(WorkerPool.respawn_delay(slot))
    assert delays == [2.0, 4.0, 8.0, 16.0, RESPAWN_MAX_S, RESPAWN_MAX_S, RESPAWN_MAX_S]
    slot.started = time.monotonic() - START_GRACE_S - 1  # it had been grading
    assert WorkerPool.respawn_delay(slot) == 0.0 and slot.quick_deaths == 0

    # and the pool itself: a worker that cannot reach its database
    cfg = Config(database_url="postgresql://judge@127.0.0.1:1/nothing", workers=1,
                 data_dir=tmp_path / "data", exercises=("glm5_mis",))
    store = Store(f"sqlite:///{tmp_path / 'judge.db'}")  # the pool's own store answers
    pool = WorkerPool(cfg, store, {"glm5_mis": 60})
    pool.start()
    try:
        deadline = time.monotonic() + 60
        while pool.slots[0].quick_deaths < 3:
            assert time.monotonic() < deadline, pool.slots[0]
            time.sleep(0.1)
        assert pool.slots[0].generation == pool.slots[0].quick_deaths  # one start per wait
        assert pool.slots[0].respawn_at > time.monotonic() + 1  # waiting 8 s before the 4th
    finally:
        pool.stop()
