"""Durability: SIGKILL the whole service (API process and workers) with work queued and running;
after a restart every submission is graded, the interrupted one retried once, nothing is lost,
nothing is left running, and a submission that already failed its retry ends as an error."""

from __future__ import annotations

import os
import sqlite3
import time

from judge.exercise import REPO_ROOT, load_exercise

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()
_WRONG = load_exercise(REPO_ROOT / "exercises/glm5_mis").wrong_solution("inclusive_endpoints")
WRONG, WRONG_TIER = _WRONG.source, _WRONG.expect_tier
SLOW_REF = REF + "\nimport time as _t\n_t.sleep(2)\n"  # still running when the service is killed


def descendants(pid: int) -> set[int]:
    parents: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_hard_kill_then_restart_grades_everything(tmp_path, service_factory):
    Service = service_factory
    svc = Service(tmp_path, workers=1).start()
    jobs = [(SLOW_REF, "accepted"), (WRONG, WRONG_TIER), ("def f(:\n", "syntax_error"), (REF, "accepted"),
            ("x = 1\n", "missing_function")]
    try:
        with svc.client() as c:
            ids = []
            for code, _ in jobs:
                r = c.post("/submit", json={"exercise": "glm5_mis", "code": code})
                assert r.status_code == 202
                ids.append(r.json()["id"])
            deadline = time.monotonic() + 60
            while c.get(f"/submissions/{ids[0]}").json()["status"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.01)
        tree = descendants(svc.proc.pid)
        assert tree, "the service has no workers"
        svc.kill()
    finally:
        svc.kill()

    deadline = time.monotonic() + 15  # the workers, their zygotes and sandboxes all go
    while (left := [p for p in tree if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running after the kill: {left}"

    db = sqlite3.connect(svc.db)
    status = dict(db.execute("SELECT id, status FROM submissions").fetchall())
    assert status[ids[0]] == "running" and all(status[i] in ("queued", "running", "done") for i in ids)
    # One that had already been retried when the service died: it must end as an error.
    db.execute("INSERT INTO submissions (id, client, exercise, mode, code, status, attempts, created_at) "
               "SELECT 'ffffffffffffffffffffffff', client, exercise, mode, code, 'running', 2, created_at "
               "FROM submissions WHERE id = ?", (ids[0],))
    db.commit()
    db.close()

    svc2 = Service(tmp_path, workers=2).start()
    try:
        with svc2.client() as c:
            docs = []
            for sid in ids + ["ffffffffffffffffffffffff"]:
                deadline = time.monotonic() + 120
                while (doc := c.get(f"/submissions/{sid}").json())["status"] not in ("done", "error"):
                    assert time.monotonic() < deadline, doc
                    time.sleep(0.05)
                docs.append(doc)
    finally:
        svc2.stop()
    assert docs[0]["attempts"] == 2  # the interrupted grading, retried once
    for (code, expect), doc in zip(jobs, docs):
        assert doc["status"] == "done", doc
        v = doc["verdict"]
        if expect == "accepted":
            assert v["verdict"] == "accepted"
        elif expect in ("syntax_error", "missing_function"):
            assert v["error"]["kind"] == expect
        else:
            assert v["verdict"] == "rejected" and any(
                t["tier"] == expect and t["status"] == "failed" for t in v["tiers"])
    poisoned = docs[-1]
    assert poisoned["status"] == "error" and poisoned["verdict"] is None
    assert "retried once" in poisoned["message"]
