"""Several hosts on one PostgreSQL: an API-only node (``judge serve --workers 0``) and two grading
hosts (``judge worker``), each a process group of its own with its own data directory. Every
submission is graded exactly once, and when one host is killed (SIGKILL to its whole group,
zygotes included) mid-grading, the other host finishes its gradings after the heartbeat stall
(retried once), none lost and none completed twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from judge.exercise import REPO_ROOT
from judge.service.store import STALL_S, Store

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()
STARTER = (REPO_ROOT / "exercises/glm5_mis/starter.py").read_text()


class WorkerHost:
    """``judge worker --concurrency N`` in a process group of its own."""

    def __init__(self, root: Path, url: str, concurrency: int = 1):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "JUDGE_DATABASE_URL": url, "JUDGE_DATA_DIR": str(root / "data"),
               "JUDGE_EXERCISES": "glm5_mis"}
        self.log_path = root / "worker.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "worker", "--concurrency",
                                          str(concurrency)], cwd=root, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 180) -> "WorkerHost":
        deadline = time.monotonic() + timeout
        while "worker(s) ready" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"judge worker not ready:\n{self.log()}")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def cluster(postgres, service_factory, tmp_path, *, concurrency: int = 1, **api_env):
    """An API-only node and two worker hosts on a fresh database: (api, workers, store)."""
    url = postgres.fresh_database()
    api = service_factory(tmp_path / "api", workers=0, JUDGE_DATABASE_URL=url, **api_env).start()
    workers = [WorkerHost(tmp_path / f"worker{i}", url, concurrency=concurrency) for i in range(2)]
    try:
        for w in workers:
            w.wait_ready()
        yield api, workers, Store(url)
    finally:
        for w in workers:
            w.stop()
        api.stop()


@pytest.fixture
def hosts(postgres, service_factory, tmp_path):
    # the API node's poll of the events table is off (an hour): what wakes its waiters and
    # streams is the other hosts' NOTIFY (judge.service.remote_changes)
    with cluster(postgres, service_factory, tmp_path, JUDGE_NOTIFY_INTERVAL="3600") as c:
        yield c


def submit_all(api, n: int) -> list[str]:
    ids = []
    for i in range(n):
        with api.client(key=("test-key-alice", "test-key-bob")[i % 2]) as c:
            code = REF if i % 3 else STARTER
            r = c.post("/submit", json={"exercise": "glm5_mis", "code": code, "mode": "submit"})
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
    return ids


def wait_all(store: Store, ids: list[str], timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = {sid: store.get(sid, None) for sid in ids}
        if all(r["status"] in ("done", "error") for r in rows.values()):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"not all graded in {timeout} s: "
                         f"{[(s, r['status']) for s, r in rows.items() if r['status'] not in ('done', 'error')]}")


def completions(store: Store, sid: str) -> int:
    return sum(1 for e in store.events(sid) if e["kind"] == "status" and json.loads(e["data"])["status"] == "done")


def graded_by(store: Store, sid: str) -> str:
    return store.execute("SELECT graded_by FROM submissions WHERE id = ?", (sid,)).fetchone()[0]


def host_of(worker_name: str) -> str:
    return worker_name.rsplit(".", 1)[-1]  # "w<slot>.<generation>.<host pid>"


def freeze_holding(store: Store, host: WorkerHost, timeout: float = 120) -> list[str]:
    """Freeze ``host``'s group (SIGSTOP) while it holds a grading; the ids it holds, read after
    the freeze: a grading it finished between a look and the signal is not counted as held."""
    def holding() -> list[str]:
        return [r["id"] for r in store.running() if host_of(r["worker"]) == str(host.proc.pid)]

    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, "the host never claimed a submission"
        if not holding():
            time.sleep(0.02)
            continue
        os.killpg(host.proc.pid, signal.SIGSTOP)
        time.sleep(0.3)  # whatever it sent before the signal has reached the database
        if held := holding():
            return held
        os.killpg(host.proc.pid, signal.SIGCONT)  # it finished in between: look again


def test_two_worker_hosts_grade_each_submission_once(hosts):
    api, workers, store = hosts
    ids = submit_all(api, 16)
    rows = wait_all(store, ids, timeout=300)
    assert all(r["status"] == "done" for r in rows.values()), [r["message"] for r in rows.values()]
    assert all(completions(store, sid) == 1 and rows[sid]["attempts"] == 1 for sid in ids)
    for i, sid in enumerate(ids):  # the starter is rejected, the reference accepted
        assert rows[sid]["outcome"] == ("accepted" if i % 3 else "rejected"), sid
    by_host = {host_of(graded_by(store, sid)) for sid in ids}
    assert by_host == {str(w.proc.pid) for w in workers}  # both hosts took part
    with api.client(key="test-key-bob") as c:  # the API node, which grades nothing, serves them
        doc = c.get(f"/submissions/{ids[1]}").json()
        assert doc["status"] == "done" and doc["verdict"]["verdict"] == "accepted"
    with api.client() as c:  # woken by a worker host's NOTIFY: ?wait= answers with the verdict
        r = c.post("/submit", params={"wait": 60}, json={"exercise": "glm5_mis", "code": REF, "mode": "submit"})
        assert r.status_code == 200 and r.json()["verdict"]["verdict"] == "accepted", r.text
        stream = c.get(f"/submissions/{r.json()['id']}/events", timeout=30).text
        assert '"done"' in stream and "event: test" in stream  # its events, from the table


def test_a_killed_host_s_gradings_are_finished_by_the_other(hosts):
    api, (victim, survivor), store = hosts
    ids = submit_all(api, 10)
    held = freeze_holding(store, victim)  # kill the victim while it holds a grading
    victim.kill()
    t_kill = time.monotonic()
    rows = wait_all(store, ids, timeout=300)
    assert all(r["status"] == "done" for r in rows.values()), [r["message"] for r in rows.values()]
    assert all(completions(store, sid) == 1 for sid in ids)  # none completed twice
    for sid in held:
        assert rows[sid]["attempts"] == 2 and host_of(graded_by(store, sid)) == str(survivor.proc.pid)
    retried = [e for sid in held for e in store.events(sid)
               if e["kind"] == "status" and json.loads(e["data"]).get("retry")]
    assert len(retried) == len(held)
    assert retried[0]["at"] - (time.time() - (time.monotonic() - t_kill)) < STALL_S + 5  # seen in seconds
    # the dead host's tickets (Procrastinate jobs "doing" on a worker without heartbeats) are
    # retried by the survivor and consumed: none is left behind
    deadline = time.monotonic() + STALL_S + 30
    while store.execute("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')").fetchone()[0]:
        assert time.monotonic() < deadline, store.execute("SELECT id, status, args FROM procrastinate_jobs").fetchall()
        time.sleep(0.5)


def test_a_host_cut_off_then_back_completes_nothing_twice(hosts):
    """A worker host frozen mid-grading (SIGSTOP of its group: no heartbeats, as when its link is
    down) past the stall limit, then resumed: the other host grades its submissions again, and
    whatever the resumed host then reports is refused; every submission is completed once."""
    api, (cut, other), store = hosts
    ids = submit_all(api, 8)
    held = freeze_holding(store, cut)
    try:
        deadline = time.monotonic() + STALL_S + 30
        while any(store.get(sid, None)["attempts"] < 2 for sid in held):  # taken back, claimed again
            assert time.monotonic() < deadline, "the frozen host's gradings were not taken back"
            time.sleep(0.2)
    finally:
        os.killpg(cut.proc.pid, signal.SIGCONT)
    rows = wait_all(store, ids, timeout=300)
    assert all(r["status"] == "done" for r in rows.values()), [r["message"] for r in rows.values()]
    assert all(completions(store, sid) == 1 for sid in ids)
    for sid in held:
        assert host_of(graded_by(store, sid)) == str(other.proc.pid)


SLOW = REF + "\nimport time as _t\n_t.sleep(4)  # loading takes seconds: a grading long enough to be caught\n"


def wait_held(store: Store, sid: str, attempt: int, timeout: float = 120) -> str:
    """The worker that holds ``sid`` running in its ``attempt``-th attempt."""
    deadline = time.monotonic() + timeout
    while True:
        row = store.get(sid, None)
        if row["status"] == "running" and row["attempts"] == attempt:
            return row["worker"]
        assert row["status"] in ("queued", "running") and time.monotonic() < deadline, row
        time.sleep(0.02)


def test_a_grading_stalled_twice_is_retried_once_then_error(postgres, service_factory, tmp_path):
    """Its host killed mid-grading, then the host that took it over killed too: the grading is
    retried once, then marked error with a message, by the next host to look; never completed,
    never retried a second time (bounded: no Procrastinate redelivery grades it again)."""
    url = postgres.fresh_database()
    api = service_factory(tmp_path / "api", workers=0, JUDGE_DATABASE_URL=url).start()
    hosts = [WorkerHost(tmp_path / f"worker{i}", url) for i in range(2)]  # (a host starts when made)
    try:
        first, second = hosts[0].wait_ready(), hosts[1].wait_ready()
        store = Store(url)
        with api.client() as c:
            sid = c.post("/submit", json={"exercise": "glm5_mis", "code": SLOW, "mode": "submit"}).json()["id"]
        by = {str(h.proc.pid): h for h in (first, second)}
        by[host_of(wait_held(store, sid, 1))].kill()
        by[host_of(wait_held(store, sid, 2, timeout=STALL_S + 60))].kill()
        hosts.append(WorkerHost(tmp_path / "worker2", url))  # a third host comes up: its pool
        hosts[2].wait_ready()  # finds the grading stalled again
        deadline = time.monotonic() + STALL_S + 60
        while (row := store.get(sid, None))["status"] != "error":
            assert row["status"] == "running" and time.monotonic() < deadline, row
            time.sleep(0.2)
        assert row["attempts"] == 2 and "no heartbeat" in row["message"] and "retried once" in row["message"]
        assert completions(store, sid) == 0
        retries = [e for e in store.events(sid) if e["kind"] == "status" and json.loads(e["data"]).get("retry")]
        assert len(retries) == 1
        time.sleep(3)  # the third host has retried the dead hosts' tickets by now: they grade nothing
        assert store.get(sid, None)["status"] == "error" and store.get(sid, None)["attempts"] == 2
    finally:
        for h in hosts:
            h.stop()
        api.stop()


@pytest.fixture
def hosts2(postgres, service_factory, tmp_path):
    """An API node and two worker hosts with two workers each: per host, one slot on both queues
    and one on Runs only."""
    with cluster(postgres, service_factory, tmp_path, concurrency=2) as c:
        yield c


def test_runs_and_the_fair_share_hold_across_hosts(hosts2):
    """Alice's backlog of Submits, then Bob's two Submits and his Run: on two hosts, Bob's Run
    starts at once, while every Submit slot is busy (the Run queue's own slots), before most of
    the backlog queued ahead of it, and Bob's Submits are served in turn with Alice's, not
    after her backlog."""
    api, workers, store = hosts2
    add = lambda client, code, mode: store.add(client, "glm5_mis", mode, code, queue_max=1000)  # noqa: E731
    backlog = [add("alice", REF, "submit") for _ in range(10)]  # queued within milliseconds
    bob = [add("bob", REF, "submit") for _ in range(2)]
    run = add("bob", STARTER, "run")
    rows = wait_all(store, backlog + bob + [run], timeout=600)
    assert all(r["status"] == "done" and r["attempts"] == 1 for r in rows.values())
    assert all(completions(store, sid) == 1 for sid in rows)
    started = sorted(rows, key=lambda sid: rows[sid]["started_at"])
    after_run = [sid for sid in backlog if rows[sid]["started_at"] > rows[run]["started_at"]]
    assert len(after_run) >= 6, [started.index(s) for s in backlog]  # most of the backlog waited
    # and it did not wait for a Submit slot: it started before any Submit grading then running ended
    busy = [r for sid, r in rows.items()
            if sid != run and r["started_at"] <= rows[run]["created_at"] < r["finished_at"]]
    assert busy and rows[run]["started_at"] < min(r["finished_at"] for r in busy)
    # in turn with Alice's (his Run counts as one of his running), not after her backlog (11th, 12th)
    assert all(started.index(sid) < 8 for sid in bob), [started.index(s) for s in bob]
    assert {host_of(graded_by(store, sid)) for sid in rows} == {str(w.proc.pid) for w in workers}
