"""The mixed run: one service, two clients. A hostile client posts a burst of attacks
(``tests/attacks``), correct and wrong solutions all at once; meanwhile an honest client submits
correct and wrong solutions one at a time, each waiting for its verdict, as a learner does.

Used by ``tests/test_api_mixed.py`` (a short run that checks verdicts, fair share, live workers
and memory) and by ``make bench`` (``judge.service.bench``: 200 submissions, the honest
client's latency). Only this module knows the workload; the checks read what it returns, the
service's database and ``/proc``.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from judge.exercise import REPO_ROOT, Exercise

ATTACKS_DIR = REPO_ROOT / "tests" / "attacks"
SOLUTIONS_DIR = REPO_ROOT / "tests" / "solutions"
# Attacks that hold their worker until a limit ends them (a call's seconds, or the whole
# grading's): in the bench's long run, not in the short one.
SLOW_ATTACKS = frozenset({"infinite_loop", "sleep_forever", "half_frame", "sigstop_self", "flood_stdout"})
# Templates, graded once per variant here (their own tests in tests/test_attacks.py try more):
# answers over the per-answer cap and over the grading's budget, and frames forged from inside
# the child (a NaN resource report, a count for the missing names, a payload over the cap).
VARIANTS: dict[str, list[dict[str, object]]] = {
    "huge_answers": [{"MB": 200}, {"MB": 40}],
    "forged_frame": [
        {"WHAT": "resources_nan", "PHASE": "call",
         "FRAME": 'frame({"ok": True, "handle": 0, "result": {"f": 0.0}, "ru": [1.0, float("nan")]})'},
        {"WHAT": "load_missing_count", "PHASE": "import",
         "FRAME": 'frame({"ok": True, "missing": 5, "ru": [0.0, 0]})'},
        {"WHAT": "payload_over_cap", "PHASE": "call", "FRAME": 'struct.pack("!II", 2, 200 << 20) + b"{}"'},
    ],
}


@dataclass
class Submission:
    """One submission of the run and what became of it."""
    client: str  # "hostile" or "honest"
    label: str  # the attack's name, or what the solution is (correct, wrong_<function>, starter)
    code: str
    expect: str  # the verdict it deserves: accepted or rejected
    id: str = ""
    latency_ms: float | None = None  # honest ones: POST /submit?wait= to its verdict
    doc: dict = field(default_factory=dict)  # the final document (GET /submissions/{id})


def attacks(subst: dict[str, object], *, slow: bool) -> dict[str, str]:
    """Every attack's source, placeholders (``{{NAME}}``) filled from ``subst`` and, for the
    templates, from each of their ``VARIANTS`` (``name[value]``); one whose placeholders are
    not all filled (a template for another kind of exercise) is left out."""
    out = {}
    for path in sorted(ATTACKS_DIR.glob("*.py")):
        if path.stem.startswith("_") or (not slow and path.stem in SLOW_ATTACKS):
            continue
        for extra in VARIANTS.get(path.stem, [{}]):
            src = path.read_text()
            for k, v in {**subst, **extra}.items():
                src = src.replace("{{" + k + "}}", str(v))
            if "{{" not in src:
                label = next((str(v) for k, v in extra.items() if k in ("WHAT", "MB")), "")
                out[f"{path.stem}[{label}]" if label else path.stem] = src
    return out


def solutions(ex: Exercise) -> list[tuple[str, str, str]]:
    """(label, code, expected verdict): the reference, an independent correct solution when
    there is one, the starter, and for each function a solution whose function returns its
    first argument (wrong by construction, whatever the exercise)."""
    ref = ex.solution_path.read_text()
    out = [("correct", ref, "accepted")]
    independent = SOLUTIONS_DIR / f"{ex.slug}_independent.py"
    if independent.is_file():
        out.append(("independent", independent.read_text(), "accepted"))
    out.append(("starter", ex.starter_path.read_text(), "rejected"))
    for f in ex.functions:
        out.append((f"wrong_{f.name}", f"{ref}\n\ndef {f.name}(*args, **kwargs):\n    return args[0]\n",
                    "rejected"))
    return out


def workload(ex: Exercise, subst: dict[str, object], *, hostile: int, honest: int,
             slow: bool) -> tuple[list[Submission], list[Submission]]:
    """``hostile`` submissions (every attack once, then correct and wrong solutions, cycling)
    and ``honest`` ones (correct and wrong, cycling)."""
    sols = solutions(ex)
    pool = [Submission("hostile", name, code, "rejected") for name, code in attacks(subst, slow=slow).items()]
    i = 0
    while len(pool) < hostile:
        label, code, expect = sols[i % len(sols)]
        pool.append(Submission("hostile", label, code, expect))
        i += 1
    learner = [Submission("honest", *sols[i % len(sols)]) for i in range(honest)]
    return pool[:hostile], learner


def run(url: str, keys: tuple[str, str], exercise: str, hostile: list[Submission],
        honest: list[Submission], *, timeout: float = 600.0) -> None:
    """Post ``hostile`` at once with ``keys[0]``, then ``honest`` one at a time with ``keys[1]``
    (each waits for its verdict), then wait for every verdict; fills in each submission."""
    def client(key: str) -> httpx.Client:
        return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)

    def post(c: httpx.Client, s: Submission, wait: float | None) -> httpx.Response:
        r = c.post("/submit", params={"wait": wait} if wait else {},
                   json={"exercise": exercise, "code": s.code, "mode": "submit"})
        if r.status_code not in (200, 202):
            raise AssertionError(f"{s.client} {s.label}: {r.status_code} {r.text[:500]}")
        s.id = r.json()["id"]
        return r

    with client(keys[0]) as bad, client(keys[1]) as good:
        for s in hostile:
            post(bad, s, None)
        for s in honest:
            t = time.perf_counter()
            post(good, s, 60)
            s.latency_ms = (time.perf_counter() - t) * 1000
        deadline = time.monotonic() + timeout
        for c, group in ((bad, hostile), (good, honest)):
            for s in group:
                while True:
                    doc = c.get(f"/submissions/{s.id}").json()
                    if doc["status"] in ("done", "error") and not (doc.get("verdict") or {}).get(
                            "artifacts_pending"):
                        s.doc = doc
                        break
                    if time.monotonic() > deadline:
                        raise AssertionError(f"{s.client} {s.label} ({s.id}) not graded: {doc['status']}")
                    time.sleep(0.05)


def claims_ahead(db: Path, honest: list[Submission]) -> list[int]:
    """For each honest submission, how many other clients' submissions a worker took between
    its being queued and its being taken: 0 under fair share whenever the honest client had
    nothing else running (FIFO: the whole backlog before it). Read from the events table,
    whose ids follow the order of commits."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = []
        for s in honest:
            (client,) = con.execute("SELECT client FROM submissions WHERE id = ?", (s.id,)).fetchone()
            queued, taken = con.execute(
                "SELECT min(id) FILTER (WHERE data LIKE '%\"queued\"%'), "
                "min(id) FILTER (WHERE data LIKE '%\"running\"%') FROM events "
                "WHERE submission = ? AND kind = 'status'", (s.id,)).fetchone()
            (n,) = con.execute(
                "SELECT count(*) FROM events e JOIN submissions s ON s.id = e.submission "
                "WHERE e.kind = 'status' AND e.data LIKE '%\"running\"%' AND e.id > ? AND e.id < ? "
                "AND s.client != ?", (queued, taken, client)).fetchone()
            out.append(n)
        return out
    finally:
        con.close()


def backlog_at(db: Path, s: Submission) -> int:
    """Other clients' submissions queued, not yet taken, when ``s`` was queued."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (client,) = con.execute("SELECT client FROM submissions WHERE id = ?", (s.id,)).fetchone()
        (queued,) = con.execute("SELECT min(id) FROM events WHERE submission = ? AND kind = 'status'",
                                (s.id,)).fetchone()
        (n,) = con.execute(
            "SELECT count(DISTINCT e.submission) FROM events e JOIN submissions s ON s.id = e.submission "
            "WHERE s.client != ? AND e.kind = 'status' AND e.id < ? AND e.data LIKE '%\"queued\"%' "
            "AND NOT EXISTS (SELECT 1 FROM events r WHERE r.submission = e.submission "
            "AND r.kind = 'status' AND r.data LIKE '%\"running\"%' AND r.id < ?)",
            (client, queued, queued)).fetchone()
        return n
    finally:
        con.close()


# --- the service's processes, from /proc ----------------------------------------------------

def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            f = _stat(int(d.name))
            if len(f) > 1 and int(f[1]) == pid and f[0] != "Z":
                out.append(int(d.name))
    return sorted(out)


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return sorted(out)


def workers(server: int) -> list[int]:
    """The grading workers of a ``judge serve`` process (its children that run a worker)."""
    out = []
    for pid in children(server):
        try:
            if b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes() and children(pid):
                out.append(pid)
        except OSError:
            pass
    return out


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def trusted_rss_mb(server: int) -> float:
    """RSS of the API process and its workers: the trusted side (the sandboxes are not it)."""
    return rss_mb([server, *workers(server)])


def summary(hostile: list[Submission], honest: list[Submission]) -> dict:
    """Verdicts by client and what was expected of them, and the honest latencies."""
    def outcome(s: Submission) -> str:
        return s.doc.get("status") if s.doc.get("status") != "done" else s.doc["verdict"]["verdict"]

    lat = sorted(s.latency_ms for s in honest if s.latency_ms is not None)
    pct = (lambda q: round(lat[min(len(lat) - 1, int(round(q * (len(lat) - 1))))], 1)) if lat else None
    return {"hostile": len(hostile), "honest": len(honest),
            "unexpected": [(s.client, s.label, s.expect, outcome(s)) for s in hostile + honest
                           if outcome(s) != s.expect],
            "honest_p50_ms": pct(0.5) if pct else None, "honest_p95_ms": pct(0.95) if pct else None,
            "honest_max_ms": round(lat[-1], 1) if lat else None}
