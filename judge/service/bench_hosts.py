"""Throughput with one and with two worker hosts: does adding a grading host add grading?

``python -m judge.service.bench_hosts [N] [REPS]`` (``make bench`` runs it; root, for the
namespaces): a ``judge.service.netns_hosts.Cluster`` (db host, API host, two worker hosts of
``--concurrency 1``, each a network namespace on one bridge) graded the same load, N reference
submissions to glm5_mis sent at once by two clients through the API host, with the second
worker host stopped (one host) and running (two hosts), the phases interleaved REPS times so
that a change in the machine's load hits both alike. Throughput is N over the span from the first
submission's commit to the last verdict, both read from the database (the hosts share this
machine's clock). Prints the medians, their ratio, and this machine's core count: the issue's
target (x1.8) is for machines with at least 4 cores, where two single-worker hosts do not share
a core; with 2 cores, the API host, PostgreSQL and the bench itself share them with the graders.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from judge.exercise import REPO_ROOT
from judge.service.netns_hosts import API_KEYS, Cluster

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()
TARGET = 1.8  # two hosts grade this many times what one does (issue 22), where cores allow
TARGET_CORES = 4


def submit_load(cluster: Cluster, n: int) -> list[str]:
    """``n`` reference submissions, half from each of two clients sending concurrently."""
    ids: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with cluster.client(key=API_KEYS[k]) as c:
            for _ in range(k, n, 2):
                r = c.post("/submit", json={"exercise": "glm5_mis", "code": REF, "mode": "submit"})
                r.raise_for_status()
                with lock:
                    ids.append(r.json()["id"])

    threads = [threading.Thread(target=client, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids


def measure(cluster: Cluster, n: int, timeout: float = 1800) -> dict:
    """One phase: the load, graded; submissions per second and who graded them."""
    import psycopg

    ids = submit_load(cluster, n)
    if len(ids) != n:
        raise RuntimeError(f"only {len(ids)} of {n} submissions were accepted")
    deadline = time.monotonic() + timeout
    with psycopg.connect(cluster.database_url, autocommit=True) as db:
        while True:
            rows = db.execute("SELECT status, created_at, finished_at, graded_by FROM submissions "
                              "WHERE id = ANY(%s)", (ids,)).fetchall()
            if all(r[0] in ("done", "error") for r in rows):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not graded in {timeout} s")
            time.sleep(0.1)
    span = max(r[2] for r in rows) - min(r[1] for r in rows)
    hosts: dict[str, int] = {}
    for r in rows:
        hosts[(r[3] or "none").rsplit(".", 1)[-1]] = hosts.get((r[3] or "none").rsplit(".", 1)[-1], 0) + 1
    return {"per_s": round(n / span, 3), "span_s": round(span, 2),
            "errors": sum(r[0] == "error" for r in rows), "by_host": sorted(hosts.values(), reverse=True)}


def main(n: int = 60, reps: int = 2) -> dict:
    with tempfile.TemporaryDirectory(prefix="judge-bench-hosts-") as d, \
            Cluster(Path(d), workers=2, concurrency=1) as cluster:
        second = cluster.workers[1]
        measure(cluster, max(4, n // 10))  # warm-up: every host's first gradings, not counted
        one, two = [], []
        for _ in range(reps):
            second.stop()
            one.append(measure(cluster, n))
            second.start().wait_ready()
            two.append(measure(cluster, n))
    p1 = statistics.median(r["per_s"] for r in one)
    p2 = statistics.median(r["per_s"] for r in two)
    cores = os.cpu_count() or 1
    return {"n": n, "reps": reps, "cores": cores, "one_host": one, "two_hosts": two,
            "one_host_per_s": p1, "two_hosts_per_s": p2, "ratio": round(p2 / p1, 2),
            "target": TARGET if cores >= TARGET_CORES else
            f"x{TARGET} applies with >= {TARGET_CORES} cores; this machine has {cores}"}


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(main(*args), indent=2))
