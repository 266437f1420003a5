"""A judge on four machines: Linux network namespaces on one bridge (judge.service.netns_hosts):
a database host (PostgreSQL on its own address), an API host (``judge serve --workers 0``) and
two worker hosts (``judge worker --concurrency 1``), each with its own data directory; only the
network joins them. The tests drive the API host over HTTP and count what happened in the
database: each submission graded exactly once (the ``done`` status events, one per stored
verdict; the attempts column), through a host killed outright, through a host cut off the
network and plugged back in, and what a worker host produced served by the API host.

One topology for the module (starting four hosts costs tens of seconds); the ``cluster`` fixture
brings every worker host back (restarted, link up) and lets the queue drain before each test, and
the kill comes last so that no restart is paid for in a plain run."""

from __future__ import annotations

import json
import os
import re
import threading
import time

import psycopg
import pytest

from judge.exercise import REPO_ROOT, load_exercise
from judge.service.netns import available
from judge.service.netns_hosts import API_KEYS, Cluster, WorkerHost
from judge.service.store import STALL_S

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()
STARTER = (REPO_ROOT / "exercises/glm5_mis/starter.py").read_text()
WRONG = load_exercise(REPO_ROOT / "exercises/glm5_mis").wrong_solution("inclusive_endpoints")

if os.geteuid() != 0:  # `make test` runs as root, where these never skip (without `ip`: they fail)
    pytestmark = pytest.mark.skip(reason=available())


@pytest.fixture(scope="module")
def running_cluster(tmp_path_factory):
    # the API host's own look at the events table is off (an hour): what wakes its waiters and
    # streams is the worker hosts' NOTIFY, across the network
    cluster = Cluster(tmp_path_factory.mktemp("netns"), workers=2,
                      api_env={"JUDGE_NOTIFY_INTERVAL": "3600"})
    with cluster:
        yield cluster


@pytest.fixture
def cluster(running_cluster):
    """The module's cluster with both worker hosts up and linked, and nothing left queued."""
    c = running_cluster
    for w in c.workers:
        w.host.link(True)
        if w.proc.poll() is not None:  # killed by a test: the machine rebooted
            w.start()
    for w in c.workers:
        w.wait_ready()
    with psycopg.connect(c.database_url, autocommit=True) as db:  # a failed test's leftovers graded
        deadline = time.monotonic() + 300
        while db.execute("SELECT count(*) FROM submissions WHERE status IN ('queued', 'running')").fetchone()[0]:
            assert time.monotonic() < deadline, "submissions of an earlier test still not graded"
            time.sleep(0.25)
    yield c


class Ledger:
    """What the database says happened, read from the caller's side of the bridge."""

    def __init__(self, url: str):
        self.db = psycopg.connect(url, autocommit=True)

    def rows(self, ids: list[str]) -> dict[str, dict]:
        cur = self.db.execute("SELECT id, status, attempts, worker, graded_by, outcome, message, verdict, "
                              "finished_at FROM submissions WHERE id = ANY(%s)", (ids,))
        names = [d.name for d in cur.description]
        return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}

    def events(self, sid: str) -> list[tuple]:
        return self.db.execute("SELECT id, kind, data FROM events WHERE submission = %s ORDER BY id",
                               (sid,)).fetchall()

    def completions(self, sid: str) -> int:
        """Verdicts stored for ``sid``: each stored verdict writes one ``done`` status event."""
        return sum(1 for _, kind, data in self.events(sid)
                   if kind == "status" and json.loads(data)["status"] == "done")

    def held_by(self, worker: WorkerHost) -> list[str]:
        """Submissions a worker of that host is grading now (workers are w<slot>.<gen>.<host pid>)."""
        return [sid for sid, name in self.db.execute(
            "SELECT id, worker FROM submissions WHERE status = 'running'").fetchall()
            if name and host_of(name) == worker.pid]

    def report(self, cluster: Cluster) -> str:
        """For a failure's message: the database's busy sessions and their locks, the hosts' logs."""
        busy = self.db.execute(
            "SELECT a.client_addr, a.state, a.wait_event, left(a.query, 120), now() - a.xact_start, "
            "(SELECT string_agg(l.locktype || ':' || l.mode || ':' || l.granted, ',') FROM pg_locks l "
            "WHERE l.pid = a.pid AND l.locktype IN ('advisory', 'transactionid', 'tuple')) "
            "FROM pg_stat_activity a WHERE a.client_addr IS NOT NULL AND a.state != 'idle'").fetchall()
        hosts = {w.host.address: w.host.name for w in cluster.workers}
        lines = [f"  {hosts.get(str(r[0]), r[0])}: {r[1:]}" for r in busy]
        logs = [f"--- {w.host.name} (pid {w.pid}):\n{w.log(3000)}" for w in cluster.workers]
        return "busy sessions:\n" + "\n".join(lines) + "\n" + "\n".join(logs)

    def wait_plotted(self, ids: list[str], timeout: float = 60) -> None:
        """Until each verdict lists its plots (drawn just after the verdict is stored)."""
        deadline = time.monotonic() + timeout
        while any(json.loads(r["verdict"]).get("artifacts_pending") for r in self.rows(ids).values()):
            assert time.monotonic() < deadline, "the plots were never listed"
            time.sleep(0.2)

    def wait_graded(self, ids: list[str], timeout: float) -> dict[str, dict]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(ids)
            pending = [s for s in ids if rows.get(s, {}).get("status") not in ("done", "error")]
            if not pending:
                return rows
            assert time.monotonic() < deadline, f"{len(pending)} of {len(ids)} not graded in {timeout} s"
            time.sleep(0.25)


@pytest.fixture
def ledger(running_cluster):
    led = Ledger(running_cluster.database_url)
    yield led
    led.db.close()


def host_of(worker_name: str) -> int:
    return int(worker_name.rsplit(".", 1)[-1])


def code_for(i: int) -> tuple[str, str]:
    """The i-th submission's source and the outcome it deserves (a quarter starter, a quarter a
    known wrong solution, half the reference)."""
    return ((STARTER, "rejected"), (WRONG.source, "rejected"), (REF, "accepted"), (REF, "accepted"))[i % 4]


def submit_from_two_clients(cluster: Cluster, n: int) -> list[tuple[str, int]]:
    """``n`` submissions, alternately from two clients sending concurrently: (id, index)."""
    out: list[tuple[str, int]] = []
    lock = threading.Lock()
    errors: list[str] = []

    def client(k: int) -> None:
        with cluster.client(key=API_KEYS[k]) as c:
            for i in range(k, n, 2):
                code, _ = code_for(i)
                r = c.post("/submit", json={"exercise": "glm5_mis", "code": code, "mode": "submit"})
                if r.status_code != 202:
                    errors.append(r.text)
                    return
                with lock:
                    out.append((r.json()["id"], i))

    threads = [threading.Thread(target=client, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    return sorted(out, key=lambda p: p[1])


def wait_holding(cluster: Cluster, ledger: Ledger, host: WorkerHost, subs: list, timeout: float = 240) -> None:
    """Until ``host`` holds a grading; when the queue runs dry first (the other host was quicker,
    this one still starting), more submissions, appended to ``subs``."""
    deadline = time.monotonic() + timeout
    while not ledger.held_by(host):
        assert time.monotonic() < deadline, f"{host.host.name} never claimed a submission:\n{host.log()}"
        if not ledger.db.execute("SELECT count(*) FROM submissions WHERE status = 'queued'").fetchone()[0]:
            subs += submit_from_two_clients(cluster, 4)
        time.sleep(0.02)


def held_after(ledger: Ledger, host: WorkerHost) -> list[str]:
    """What the database says ``host`` was grading once it can say nothing more (killed, cut
    off): a statement it sent just before may still land, so look after a moment."""
    time.sleep(0.5)
    return ledger.held_by(host)


def test_200_submissions_from_two_clients_each_graded_once_by_both_hosts(cluster, ledger):
    subs = submit_from_two_clients(cluster, 200)
    ids = [sid for sid, _ in subs]
    rows = ledger.wait_graded(ids, timeout=900)
    assert [rows[s]["status"] for s in ids] == ["done"] * 200, [rows[s]["message"] for s in ids if rows[s]["message"]]
    for sid, i in subs:
        assert rows[sid]["outcome"] == code_for(i)[1], (i, sid)
        assert rows[sid]["attempts"] == 1 and ledger.completions(sid) == 1, (sid, rows[sid]["attempts"])
    hosts = {host_of(rows[s]["graded_by"]) for s in ids}
    assert hosts == {w.pid for w in cluster.workers}  # both hosts graded some
    with cluster.client(key=API_KEYS[1]) as c:  # the wrong one fails where it should, as seen by the API host
        sid = next(sid for sid, i in subs if i % 4 == 1)
        doc = c.get(f"/submissions/{sid}").json()
        failed = [t["tier"] for t in doc["verdict"]["tiers"] if t["status"] in ("failed", "error")]
        assert doc["verdict"]["verdict"] == "rejected" and WRONG.expect_tier in failed, doc["verdict"]


def test_a_host_cut_off_then_plugged_back_stores_nothing_for_what_was_taken_over(cluster, ledger):
    cut, other = cluster.workers
    subs = submit_from_two_clients(cluster, 10)
    for _ in range(5):  # its grading may end between our look and the cut: then again
        wait_holding(cluster, ledger, cut, subs)
        cut.host.link(False)
        if held := held_after(ledger, cut):
            break
        cut.host.link(True)
    assert held, "the host was never cut off holding a grading"
    ids = [sid for sid, _ in subs]
    try:
        deadline = time.monotonic() + 300  # the stall, then the other host's worker once free
        while True:  # taken back after the stall and graded by the other host
            rows = ledger.rows(held)
            if all(r["status"] == "done" for r in rows.values()):
                break
            assert time.monotonic() < deadline, \
                f"the cut-off host's gradings were not taken over: {rows}\n{ledger.report(cluster)}"
            time.sleep(0.2)
        rows = ledger.wait_graded(ids, timeout=300)  # the rest, by the other host alone
        ledger.wait_plotted(held)  # the other host's plots, listed just after its verdict
        before = {sid: (ledger.rows([sid])[sid], ledger.events(sid)) for sid in held}
    finally:
        cut.host.link(True)
    # back on the network: the cut-off host grades again (so whatever it had to say about its old
    # grading it has said), yet what it had held is as the other host left it
    deadline = time.monotonic() + 240
    back: list[str] = []
    while not back:
        assert time.monotonic() < deadline, f"the host plugged back in never graded again:\n{cut.log()}"
        more = [sid for sid, _ in submit_from_two_clients(cluster, 2)]
        done = ledger.wait_graded(more, timeout=240)
        back = [s for s in more if done[s]["graded_by"] and host_of(done[s]["graded_by"]) == cut.pid]
        ids += more
    for sid in held:  # fenced: no verdict, no progress, no artifact listing from the stale host
        (row, events), now = before[sid], ledger.events(sid)
        assert now == events, f"{sid}: written after the take-over: {now[len(events):]}"
        assert ledger.rows([sid])[sid] == row, sid
    rows = ledger.rows(ids)
    assert all(rows[s]["status"] == "done" for s in ids), [rows[s]["message"] for s in ids]
    assert all(ledger.completions(s) == 1 for s in ids)
    for sid in held:
        assert rows[sid]["attempts"] == 2 and host_of(rows[sid]["graded_by"]) == other.pid
    for sid, i in subs:
        assert rows[sid]["outcome"] == code_for(i)[1]


def _sse(text: str) -> list[dict]:
    """The events of an SSE body: id (None for the end), event, data."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(m.groups() for m in re.finditer(r"^(id|event|data): (.*)$", block, re.M))
        if "event" in fields:
            out.append({"id": int(fields["id"]) if "id" in fields else None, "event": fields["event"],
                        "data": json.loads(fields["data"])})
    return out


def test_the_api_host_serves_artifacts_and_events_of_a_grading_done_on_a_worker_host(cluster, ledger):
    with cluster.client(key=API_KEYS[1]) as c:
        r = c.post("/submit", json={"exercise": "glm5_mis", "code": REF, "mode": "submit"})
        assert r.status_code == 202, r.text
        sid = r.json()["id"]
        with c.stream("GET", f"/submissions/{sid}/events", timeout=120) as s:  # live, from the start
            live = _sse("".join(s.iter_text()))
        kinds = [e["event"] for e in live]
        assert kinds[0] == "status" and kinds[-1] == "end", kinds
        assert {e["data"]["tier"] for e in live if e["event"] == "test"} == {"T0", "T1", "T2", "T3"}
        assert live[-1]["data"]["verdict"]["verdict"] == "accepted"
        graded_by = ledger.rows([sid])[sid]["graded_by"]
        assert host_of(graded_by) in {w.pid for w in cluster.workers}  # not the API host's doing
        numbered = [e for e in live if e["id"] is not None]
        assert [e["id"] for e in numbered] == list(range(1, len(numbered) + 1))

        deadline = time.monotonic() + 60
        doc = c.get(f"/submissions/{sid}").json()
        while doc["verdict"].get("artifacts_pending"):  # the plots, drawn just after the verdict
            assert time.monotonic() < deadline, "the plots were never listed"
            time.sleep(0.1)
            doc = c.get(f"/submissions/{sid}").json()
        whole = [e for e in _sse(c.get(f"/submissions/{sid}/events", timeout=60).text) if e["id"] is not None]
        assert whole[:len(numbered)] == numbered  # (then the plots' "artifacts" event, after the end)
        k = len(numbered) // 2  # resumed after the k-th: the rest replayed from the events table
        replay = _sse(c.get(f"/submissions/{sid}/events", headers={"Last-Event-ID": str(k)}, timeout=60).text)
        assert [e for e in replay if e["id"] is not None] == whole[k:]
        assert replay[-1]["event"] == "end" and replay[-1]["data"]["verdict"]["verdict"] == "accepted"
        arts = {a["name"]: a for a in doc["verdict"]["artifacts"]}
        assert "metrics.json" in arts and {"bandit.vl.json", "sweep.vl.json"} <= set(arts)
        for a in arts.values():  # the worker host's files, from the API host
            f = c.get(a["path"])
            assert f.status_code == 200, (a["name"], f.status_code, f.text[:300])
            assert f.headers["content-type"].startswith(a["media_type"]) and len(f.content) == a["size"]
        drawn = c.get(f"/submissions/{sid}/artifacts/bandit.svg")  # drawn by the API host from the spec
        assert drawn.status_code == 200 and drawn.content.startswith(b"<?xml"), drawn.text[:300]


def test_a_host_killed_mid_grading_its_gradings_are_finished_by_the_other(cluster, ledger):
    victim, survivor = cluster.workers
    subs = submit_from_two_clients(cluster, 12)
    for _ in range(3):  # its grading may end between our look and the kill: then again
        wait_holding(cluster, ledger, victim, subs)
        killed_at = time.time()
        assert victim.kill() >= 3  # the worker host, its worker, the zygote (and what it forked)
        assert not victim.host.pids()
        if held := held_after(ledger, victim):
            break
        victim.start().wait_ready()
    assert held, "the victim was never killed holding a grading"
    ids = [sid for sid, _ in subs]
    rows = ledger.wait_graded(ids, timeout=300)
    assert all(rows[s]["status"] == "done" for s in ids), [rows[s]["message"] for s in ids]  # none lost
    assert all(ledger.completions(s) == 1 for s in ids)  # none completed twice
    for sid in held:
        assert rows[sid]["attempts"] == 2 and host_of(rows[sid]["graded_by"]) == survivor.pid
        retry = [json.loads(d) for _, k, d in ledger.events(sid) if k == "status" and json.loads(d).get("retry")]
        assert len(retry) == 1
    for sid, i in subs:
        assert rows[sid]["outcome"] == code_for(i)[1]
    # detected by the heartbeat's stall in seconds, not a broker's visibility timeout (an hour)
    retried_at = ledger.db.execute("SELECT min(at) FROM events WHERE submission = ANY(%s) AND kind = 'status' "
                                   "AND data LIKE '%%retry%%'", (held,)).fetchone()[0]
    assert retried_at - killed_at < 6 * STALL_S
