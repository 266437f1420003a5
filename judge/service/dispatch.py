"""Dispatch on PostgreSQL through Procrastinate: a job per queued submission, as a claim ticket.

Every transaction that queues a submission (``Store.add``, a retry, a clean shutdown's release)
also defers one Procrastinate job for that submission's mode, on that transaction's own
connection, by calling Procrastinate's own defer function (``procrastinate_defer_jobs_v1``, what
``Task.defer`` runs): the submission and its job commit together or not at all.

A job is a *ticket*, not a submission: ``{"mode": "run"|"submit", "submission": id}``. The
worker host that fetches it (``judge.service.worker_host``) hands it to a free local worker
process, which asks the store for the fair-share next submission of that mode (``Store.claim``'s
SQL, across every host) and grades it. So Procrastinate gives durability (the job is a row
committed with the submission), delivery (LISTEN/NOTIFY plus polling, ``FOR UPDATE SKIP
LOCKED``), per-worker heartbeats and stalled-job detection, while the store keeps deciding whose
submission goes next, counts the attempts (retried once, then error) and fences a stale worker's
verdict (``Store.finish(worker=...)``). A ticket that finds nothing to claim ends at once, so a
surplus ticket (a stalled one retried while its submission was already queued again) costs one
query; ``reconcile`` defers what a lost ticket leaves missing.

Queues: Run tickets go to queue ``run`` (priority 1), Submit tickets to ``submit`` (priority 0).
Each host runs one Procrastinate worker on both queues (Runs first, by priority) and, with two or
more worker processes, a second on ``run`` only: a slot that a backlog of Submits never takes.

The schema is Procrastinate's own ``schema.sql``, applied once per database beside the judge's
Alembic revisions (``ensure_schema``), with the version that applied it recorded in
``judge_dispatch_schema``; a newer Procrastinate applies its migration scripts in order.
"""

from __future__ import annotations

import re
from importlib import resources

TASK = "judge.grade"  # the Procrastinate task of every ticket
QUEUES = ("run", "submit")  # a submission's mode is its ticket's queue
PRIORITY = {"run": 1, "submit": 0}  # a worker on both queues fetches Runs first

# One ticket for the submission ``%s``, deferred in the caller's transaction (its mode's queue).
DEFER_FOR = """
SELECT procrastinate_defer_jobs_v1(ARRAY[ROW(s.mode, %s::text, CASE WHEN s.mode = 'run' THEN 1 ELSE 0 END,
       NULL, NULL, jsonb_build_object('mode', s.mode, 'submission', s.id), NULL)
       ::procrastinate_job_to_defer_v1]) FROM submissions s WHERE s.id = %s
"""

# ``n`` tickets of mode ``m`` with no particular submission (``reconcile``).
DEFER_MODE = """
SELECT procrastinate_defer_jobs_v1(array_agg(ROW(%(m)s::text, %(task)s::text, %(p)s::int, NULL, NULL,
       jsonb_build_object('mode', %(m)s::text), NULL)::procrastinate_job_to_defer_v1))
FROM generate_series(1, %(n)s)
"""

# Per mode: submissions that need a ticket (queued, or running: its ticket is held while it
# grades) minus the tickets that exist (todo or doing). Positive: that many are missing.
MISSING = """
SELECT m.mode,
       (SELECT count(*) FROM submissions s WHERE s.mode = m.mode AND s.status IN ('queued', 'running'))
     - (SELECT count(*) FROM procrastinate_jobs j WHERE j.queue_name = m.mode AND j.task_name = %s::text
        AND j.status IN ('todo', 'doing'))
FROM (VALUES ('run'), ('submit')) AS m(mode)
"""

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)_(\d+)_")


def procrastinate_version() -> str:
    from importlib.metadata import version

    return version("procrastinate")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def scripts_since(version: str) -> list:
    """Procrastinate's migration scripts newer than ``version``, in the order they apply."""
    since = _key(version)
    folder = resources.files("procrastinate.sql").joinpath("migrations")
    return [p for p in sorted(folder.iterdir(), key=lambda p: p.name)
            if (m := _VERSION.match(p.name)) and tuple(map(int, m.groups()[:3])) > since]


def ensure_schema(raw) -> None:
    """Procrastinate's tables and functions on this database (``raw``: an autocommit psycopg
    connection; the caller holds the migration lock). Applied in full on a database that has
    none; on one applied by an older Procrastinate, its migration scripts since then, in order
    (each in its own transaction: some add enum values that later ones use)."""
    installed = procrastinate_version()
    raw.execute("CREATE TABLE IF NOT EXISTS judge_dispatch_schema (version TEXT NOT NULL)")
    row = raw.execute("SELECT version FROM judge_dispatch_schema").fetchone()
    if row is not None and _key(row[0]) >= _key(installed):
        return
    if row is None:
        with raw.transaction():
            if raw.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0] is None:
                raw.execute(resources.files("procrastinate.sql").joinpath("schema.sql").read_text(encoding="utf-8"))
            raw.execute("INSERT INTO judge_dispatch_schema (version) VALUES (%s)", (installed,))
        return
    for script in scripts_since(row[0]):
        with raw.transaction():
            raw.execute(script.read_text(encoding="utf-8"))
    raw.execute("UPDATE judge_dispatch_schema SET version = %s", (installed,))


def has_schema(raw) -> bool:
    """True when this Procrastinate's schema is applied (one tiny query, on every store open)."""
    if raw.execute("SELECT to_regclass('judge_dispatch_schema')").fetchone()[0] is None:
        return False
    row = raw.execute("SELECT version FROM judge_dispatch_schema").fetchone()
    return row is not None and _key(row[0]) >= _key(procrastinate_version())


def defer_for(raw, sid: str) -> None:
    """Inside the transaction that queues ``sid``: its ticket (committed with it, or not at all)."""
    raw.execute(DEFER_FOR, (TASK, sid))


def defer_mode(raw, mode: str, n: int = 1) -> None:
    raw.execute(DEFER_MODE, {"m": mode, "task": TASK, "p": PRIORITY[mode], "n": n})


def missing(raw) -> dict[str, int]:
    """Mode → how many tickets queued and running submissions lack (one snapshot; none is the
    invariant, surplus tickets are harmless: they find nothing)."""
    return {mode: n for mode, n in raw.execute(MISSING, (TASK,)).fetchall() if n > 0}


def reconcile(raw) -> dict[str, int]:
    """Defer the tickets missing for queued submissions (the caller's write transaction): a
    ticket lost between a stalled host's retry and its late finish leaves its submission queued
    with none."""
    out = missing(raw)
    for mode, n in out.items():
        defer_mode(raw, mode, n)
    return out
