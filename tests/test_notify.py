"""Change notification and batched progress: workers push a submission's id through a pipe after
each commit, and the API wakes its waiters without waiting for its (slow) fallback poll; test
results reach the events table in batches, in order, all of them before the verdict."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time

import pytest

from judge.service.guard import Changes
from judge.service.config import Config
from judge.exercise import REPO_ROOT
from judge.models import Verdict
from judge.service.progress import ProgressWriter, notify_change
from judge.service.store import Store
from judge.service.worker import Worker

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()
SLOW_LOAD = REF + "\nimport time as _t\n_t.sleep(1)\n"  # its stream waits before the first test


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


@contextlib.asynccontextmanager
async def listening(store: Store, interval: float, fd: int | None):
    """The API's ``Changes``, listening in the running loop for the block."""
    changes = Changes(store, interval=interval, fd=fd)
    changes.start()
    try:
        yield changes
    finally:
        changes.stop()


# --- Changes (the API's side) ----------------------------------------------------------------

def test_a_notification_wakes_its_waiters_without_the_poll(tmp_path, pipe, run_async):
    store = Store(tmp_path / "j.db")
    r, w = pipe

    async def main():
        async with listening(store, 3600.0, r) as changes:  # the poll would never come in time
            waiting = asyncio.create_task(changes.wait("a" * 24, 30.0))
            other = asyncio.create_task(changes.wait("b" * 24, 0.3))
            await asyncio.sleep(0.01)
            threading.Timer(0.05, notify_change, (w, "a" * 24)).start()
            assert await waiting is True
            assert await other is False  # another submission's notification does not wake it

    run_async(main())


def test_new_events_wake_only_event_streams(tmp_path, pipe, run_async):
    store = Store(tmp_path / "j.db")
    r, w = pipe
    sid = "c" * 24

    async def main():
        async with listening(store, 3600.0, r) as changes:
            stream = asyncio.create_task(changes.wait(sid, 30.0, events=True))
            verdict = asyncio.create_task(changes.wait(sid, 0.3))
            await asyncio.sleep(0.01)
            notify_change(w, sid, "e")
            assert await stream is True
            assert await verdict is False  # ?wait= only wakes for a new state
            verdict = asyncio.create_task(changes.wait(sid, 30.0))
            await asyncio.sleep(0.01)
            notify_change(w, sid, "s")
            assert await verdict is True

    run_async(main())


def test_without_notifications_the_poll_still_wakes_waiters(tmp_path, run_async):
    store = Store(tmp_path / "j.db")
    sid = store.add("x", "glm5_mis", "submit", "x = 1", queue_max=10)

    async def main():
        async with listening(store, 0.02, None) as changes:
            waiting = asyncio.create_task(changes.wait(sid, 30.0))
            await asyncio.sleep(0.1)  # the poll has seen the current state
            assert not waiting.done()
            store.progress(sid, {"tier": "T0", "name": "t", "status": "passed"})  # nobody notifies
            assert await waiting is True

    run_async(main())


def test_a_full_pipe_never_blocks_the_writer(pipe):
    """A full pipe drops the notifications that do not fit (whole: never half a line), the
    writer never waits, and once the API has read, notifications fit again."""
    r, w = pipe
    os.set_blocking(w, False)
    os.set_blocking(r, False)
    done = []

    def write() -> None:
        for _ in range(10000):  # far more than a pipe holds
            notify_change(w, "d" * 24)  # neither blocks nor raises
            done.append(1)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(30.0)
    assert not writer.is_alive(), "notify_change blocked on a full pipe"
    assert len(done) == 10000
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(r, 1 << 20):
            data += chunk
    lines = data.split(b"\n")
    assert lines.pop() == b""  # ends with a whole line
    assert 0 < len(lines) < 10000 and set(lines) == {b"s" + b"d" * 24}  # some dropped, none cut
    notify_change(w, "e" * 24, "e")  # room again
    assert os.read(r, 100) == b"e" + b"e" * 24 + b"\n"


# --- ProgressWriter (the worker's side) --------------------------------------------------------

def test_progress_is_written_in_order_in_batches_and_flushed_on_demand(tmp_path):
    store = Store(tmp_path / "j.db")
    sid = store.add("x", "glm5_mis", "submit", "x = 1", queue_max=10)
    seen: list[tuple[str, str, int]] = []

    def changed(s: str, kind: str) -> None:  # called after the commit: the events are there
        seen.append((s, kind, len(store.events(s))))

    writer = ProgressWriter(store, changed, delay=3600.0)
    for i in range(30):
        writer.add(sid, {"tier": "T0", "name": f"t{i}", "status": "passed"})
    assert [e["kind"] for e in store.events(sid)] == ["status"]  # nothing written yet
    writer.flush()
    tests = [json.loads(e["data"])["name"] for e in store.events(sid) if e["kind"] == "test"]
    assert tests == [f"t{i}" for i in range(30)]
    assert seen == [(sid, "e", 31)]  # one write, one notification, after the commit

    quick = ProgressWriter(store, changed, delay=0.01)
    for i in range(30, 35):
        quick.add(sid, {"tier": "T1", "name": f"t{i}", "status": "passed"})
    deadline = time.monotonic() + 30
    while len(store.events(sid)) < 36:  # the background thread writes them without a flush
        assert time.monotonic() < deadline, "progress was never written"
        time.sleep(0.01)
    tests = [json.loads(e["data"])["name"] for e in store.events(sid) if e["kind"] == "test"]
    assert tests == [f"t{i}" for i in range(35)]


def test_results_taken_for_the_verdict_are_written_with_it(tmp_path):
    store = Store(tmp_path / "j.db")
    sid = store.add("x", "glm5_mis", "submit", "x = 1", queue_max=10)
    store.claim("w")
    writer = ProgressWriter(store, lambda s, k: None, delay=3600.0)
    for i in range(3):
        writer.add(sid, {"tier": "T0", "name": f"t{i}", "status": "passed"})
    with writer.taken() as tests:
        store.finish(sid, "{}", "accepted", tests)
    writer.flush()  # nothing left
    events = store.events(sid)
    assert [e["kind"] for e in events] == ["status", "status", "test", "test", "test", "status"]
    assert [json.loads(e["data"]).get("name") for e in events[2:5]] == ["t0", "t1", "t2"]
    assert json.loads(events[-1]["data"])["status"] == "done"


class RecordingWorker(Worker):
    """Records, at each notification, what the API would then read from the database."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[tuple[str, str, int]] = []

    def changed(self, sid: str, kind: str = "s") -> None:
        row = self.store.get(sid, None)
        self.seen.append((kind, row["status"], len(self.store.events(sid))))
        super().changed(sid, kind)


def test_worker_notifies_after_each_commit_and_writes_every_result_before_the_verdict(tmp_path, sandbox, pipe):
    cfg = Config(database_url=f"sqlite:///{tmp_path / 'judge.db'}", workers=1, data_dir=tmp_path / "data",
                 exercises=("glm5_mis",))
    r, w = pipe
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    worker = RecordingWorker(cfg, "wtest", 0, 1, changes_fd=w)
    worker.preload()
    worker.sandbox = sandbox
    try:
        store = worker.store
        sid = store.add("a", "glm5_mis", "submit", REF, queue_max=10)
        worker.run(store.claim("wtest"))
        lines = os.read(r, 1 << 16).decode().split("\n")[:-1]
    finally:
        worker.sandbox = None
    assert set(lines) <= {f"s{sid}", f"e{sid}"} and lines[-1] == f"s{sid}"
    v = Verdict.model_validate_json(store.get(sid, None)["verdict"])
    n_tests = sum(len(t.tests) for t in v.tiers)
    events = store.events(sid)
    kinds = [e["kind"] for e in events]
    # every test result, in order, before the verdict's status event
    done = next(i for i, e in enumerate(events) if e["kind"] == "status" and '"done"' in e["data"])
    assert kinds[:done].count("test") == n_tests
    names = [(json.loads(e["data"])["tier"], json.loads(e["data"])["name"]) for e in events if e["kind"] == "test"]
    assert names == [(t.tier, x.name) for t in v.tiers for x in t.tests]
    # the first notification that shows the verdict already finds all its results committed
    first_done = next(s for s in worker.seen if s[1] == "done")
    assert first_done[0] == "s" and first_done[2] == n_tests + 3  # queued, running, done
    assert len(worker.seen) == len(lines)


# --- the service, with a fallback poll too slow to matter -------------------------------------

def test_service_answers_through_notifications(tmp_path, service_factory):
    """With the API's fallback poll an hour apart, ?wait= still answers with the verdict, an
    artifact request still gets its plot, and an event stream still follows every test."""
    svc = service_factory(tmp_path, workers=1, JUDGE_NOTIFY_INTERVAL="3600").start()
    try:
        with svc.client() as c:
            for _ in range(2):
                r = c.post("/submit", params={"wait": 30}, json={"exercise": "glm5_mis", "code": REF})
                assert r.status_code == 200, r.text  # 202: the verdict was never noticed
                assert r.json()["verdict"]["verdict"] == "accepted"
            f = c.get(f"/submissions/{r.json()['id']}/artifacts/metrics.json")  # waits for the plots
            assert f.status_code == 200 and json.loads(f.content)

            r = c.post("/submit", json={"exercise": "glm5_mis", "code": SLOW_LOAD})
            assert r.status_code == 202
            with c.stream("GET", f"/submissions/{r.json()['id']}/events") as s:
                text = "".join(s.iter_text())
    finally:
        svc.stop()
    assert ": keep-alive" not in text  # every wake-up came from a notification
    blocks = [b for b in text.split("\n\n") if b.startswith(("id:", "event:"))]
    kinds = [re.search(r"^event: (\w+)", b, re.M).group(1) for b in blocks]
    data = [json.loads(re.search(r"^data: (.*)$", b, re.M).group(1)) for b in blocks]
    ids = [int(re.search(r"^id: (\d+)", b, re.M).group(1)) for b in blocks if b.startswith("id:")]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert kinds[-1] == "end"
    verdict = data[-1]["verdict"]
    assert verdict["verdict"] == "accepted"
    tests = [(d["tier"], d["name"]) for d, k in zip(data, kinds) if k == "test"]
    assert tests == [(t["tier"], x["name"]) for t in verdict["tiers"] for x in t["tests"]]
    assert [d["status"] for d, k in zip(data, kinds) if k == "status"] == ["queued", "running", "done"]
