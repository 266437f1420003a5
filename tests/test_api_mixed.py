"""The mixed run, short: a real service (2 workers) graded by two clients at once. A hostile
client posts every quick attack of tests/attacks plus correct and wrong solutions in one burst;
an honest client meanwhile submits correct and wrong solutions one at a time. Afterwards every
verdict is the one its code deserves, no worker was replaced, nothing is left running, the
trusted side's memory is back within 10% of its rest level, and a fair share held: no honest
submission waited while a worker took the hostile backlog (ordering, from the events table; no
wall-clock assertion). The 200-submission version, with latencies, is in ``make bench``."""

from __future__ import annotations

import time

import pytest

from judge.exercise import discover
from judge.service import mixed

KEYS = ("test-key-alice", "test-key-bob")  # tests/conftest.py: alice is hostile, bob honest


def settle(check, timeout: float = 20.0):
    """``check()`` until it holds (True) or the time is up; its last answer."""
    deadline = time.monotonic() + timeout
    while not (ok := check()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return ok


@pytest.fixture
def svc(tmp_path_factory, service_factory):
    s = service_factory(tmp_path_factory.mktemp("mixed"), workers=2).start()
    yield s
    s.stop()


def test_a_mixed_run_leaves_workers_alive_memory_at_rest_and_the_honest_client_served(svc, tmp_path):
    ex = discover()["glm5_mis"]
    server = svc.proc.pid
    with svc.client(KEYS[0]) as c:  # warm both workers, and wait for the previews
        deadline = time.monotonic() + 120
        while not c.get("/exercises/glm5_mis").json()["previews_ready"]:
            assert time.monotonic() < deadline, "previews were not built"
            time.sleep(0.2)
        warm = [mixed.Submission("hostile", "correct", ex.solution_path.read_text(), "accepted")
                for _ in range(4)]
        mixed.run(svc.url, KEYS, "glm5_mis", warm, [])
    time.sleep(1.0)
    workers = mixed.workers(server)
    assert len(workers) == 2, workers
    zygotes = [z for w in workers for z in mixed.children(w)]
    rest_mb = mixed.trusted_rss_mb(server)
    rest_tree = len(mixed.descendants(server))

    subst = {"REPO": svc.root, "JUDGE_PID": server, "ZYGOTE_PID": zygotes[0], "DATABASE": svc.db,
             "TARGET": tmp_path / "pwned.txt", "NONCE": f"mixed-{server}", "MARKER": "honest-marker-7",
             "PORT": 9, "REFERENCE": ex.solution_path.read_text()}
    n_attacks = len(mixed.attacks(subst, slow=False))
    hostile, honest = mixed.workload(ex, subst, hostile=n_attacks + 6, honest=6, slow=False)
    for s in honest:
        s.code = "# honest-marker-7\n" + s.code  # what find_other_submission looks for
    mixed.run(svc.url, KEYS, "glm5_mis", hostile, honest)

    result = mixed.summary(hostile, honest)
    assert result["unexpected"] == [], result["unexpected"]
    for s in hostile + honest:
        assert s.doc["status"] == "done" and s.doc["attempts"] == 1, (s.label, s.doc.get("message"))
    assert not (tmp_path / "pwned.txt").exists()

    # fair share: the first honest submission came behind a backlog, yet none of them waited
    # behind more than one of the hostile client's claims (round robin between two clients: at
    # most one turn of the other's, e.g. when both had nothing running and the honest client was
    # the more recently served; FIFO put 26 ahead of the first)
    assert mixed.backlog_at(svc.db, honest[0]) >= 10
    assert max(mixed.claims_ahead(svc.db, honest)) <= 1, mixed.claims_ahead(svc.db, honest)

    # every worker alive (the same processes), nothing left behind, memory back at rest
    assert mixed.workers(server) == workers, "a worker was replaced during the run"
    with svc.client() as c:
        assert c.get("/readyz").json()["workers_ready"] == 2
    assert settle(lambda: len(mixed.descendants(server)) == rest_tree), \
        f"processes left: {mixed.descendants(server)} (at rest {rest_tree})"
    assert settle(lambda: mixed.trusted_rss_mb(server) <= 1.10 * rest_mb), \
        f"trusted side: {mixed.trusted_rss_mb(server):.0f} MB after the run, {rest_mb:.0f} MB at rest"
