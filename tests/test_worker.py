"""A grading worker: a job graded through ``grade()`` into the store (progress events, the
verdict, artifacts under the data dir), previews, isolation required, whatever a grading raises.
(The pool that starts and restarts workers: tests/test_pool.py.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from judge.errors import SubmissionFailure
from judge.service.artifacts import artifacts_scratch
from judge.service.catalog import preview_dir
from judge.service.config import Config
from judge.exercise import REPO_ROOT
from judge.models import Verdict
from judge.service.store import Store
from judge.service.worker import Worker, artifacts_dir

REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()


@pytest.fixture
def cfg(tmp_path):
    return Config(database_url=f"sqlite:///{tmp_path / 'judge.db'}", workers=1, data_dir=tmp_path / "data",
                  exercises=("glm5_mis",))


@pytest.fixture
def worker(cfg, sandbox):
    w = Worker(cfg, "wtest", 0, 1)
    w.preload()
    w.sandbox = sandbox  # the session's warm sandbox (tests/conftest.py) instead of a new one
    yield w
    w.sandbox = None


def test_worker_grades_into_the_store(cfg, worker):
    store = worker.store
    ok = store.add("a", "glm5_mis", "run", REF, queue_max=10)
    bad = store.add("a", "glm5_mis", "submit", "def f(:\n", queue_max=10)
    gone = store.add("a", "no_such_exercise", "submit", "x = 1", queue_max=10)
    for _ in range(3):
        worker.run(store.claim("wtest"))

    row = store.get(ok, None)
    assert row["status"] == "done" and row["outcome"] == "accepted"
    v = Verdict.model_validate_json(row["verdict"])
    assert v.mode == "run" and v.seed == 0
    names = {a.name for a in v.artifacts}
    assert "metrics.json" in names
    for a in v.artifacts:
        assert a.path == f"/submissions/{ok}/artifacts/{a.name}"
        assert (artifacts_dir(cfg, ok) / a.name).stat().st_size == a.size
    tests = [json.loads(e["data"]) for e in store.events(ok) if e["kind"] == "test"]
    assert len(tests) == sum(len(t.tests) for t in v.tiers) and tests[0]["tier"] == "T0"

    assert Verdict.model_validate_json(store.get(bad, None)["verdict"]).error.kind == "syntax_error"
    assert store.get(gone, None)["status"] == "error" and "no_such_exercise" in store.get(gone, None)["message"]


def test_interrupted_attempt_starts_from_a_clean_folder(cfg, worker):
    sid = worker.store.add("a", "glm5_mis", "submit", "def f(:\n", queue_max=10)
    stale = artifacts_scratch(cfg.data_dir, sid)  # where this process grades it (judge.service.blobs)
    stale.mkdir(parents=True)
    (stale / "left_over.png").write_bytes(b"old")
    worker.run(worker.store.claim("wtest"))
    assert not (stale / "left_over.png").exists() and not artifacts_dir(cfg, sid).exists()
    assert Verdict.model_validate_json(worker.store.get(sid, None)["verdict"]).artifacts == []


def test_previews_are_built_once(cfg, worker):
    ex = worker.exercises["glm5_mis"]
    worker.build_preview(ex)
    folder = preview_dir(cfg, ex)
    files = sorted(p.name for p in folder.iterdir())
    assert "metrics.json" in files and {"bandit.vl.json", "sweep.vl.json"} <= set(files)
    mtime = (folder / "metrics.json").stat().st_mtime
    worker.build_preview(ex)  # cached
    assert (folder / "metrics.json").stat().st_mtime == mtime


def test_workers_require_isolation_unless_a_weak_sandbox_is_allowed(cfg):
    """The service's sandbox refuses a machine without Landlock or seccomp (the worker exits
    EXIT_REFUSED on IsolationUnavailable) unless JUDGE_ALLOW_WEAK_SANDBOX says otherwise."""
    strict = Worker(cfg, "wstrict", 0, 1).sandbox_options()
    weak = Worker(dataclasses.replace(cfg, allow_weak_sandbox=True), "wweak", 0, 1).sandbox_options()
    assert strict == {"spares": True, "require_isolation": True}
    assert weak == {"spares": True, "require_isolation": False}


@pytest.mark.parametrize("raised", [SubmissionFailure("runtime_error", "escaped"), GeneratorExit(),
                                    SystemExit(0), KeyboardInterrupt()],
                         ids=["SubmissionFailure", "GeneratorExit", "SystemExit", "KeyboardInterrupt"])
def test_a_worker_survives_whatever_a_grading_raises(cfg, worker, monkeypatch, raised):
    """Only a real stop of the worker (its SIGTERM) may take a SystemExit out of a grading;
    anything else that escapes one, BaseException included, is that submission's error and the
    worker grades the next."""
    import judge.grading
    import judge.service.worker as workers

    store = worker.store
    sid = store.add("a", "glm5_mis", "submit", REF, queue_max=10)

    def escapes(*a, **k):
        raise raised

    monkeypatch.setattr(judge.grading, "grade", escapes)
    worker.run(store.claim("wtest"))  # does not raise
    assert store.get(sid, None)["status"] in ("queued", "error")  # retried once, then an error
    monkeypatch.undo()
    ok = store.add("a", "glm5_mis", "run", REF, queue_max=10)
    while (job := store.claim("wtest")) is not None:
        worker.run(job)
    assert store.get(ok, None)["outcome"] == "accepted"
    monkeypatch.setattr(judge.grading, "grade", escapes)
    monkeypatch.setattr(workers, "_SHUTDOWN", type("Set", (), {"is_set": lambda self: True})())
    stopping = store.add("a", "glm5_mis", "submit", REF, queue_max=10)
    if isinstance(raised, (SystemExit, KeyboardInterrupt)):
        with pytest.raises(type(raised)):  # the worker is being stopped: it goes
            worker.run(store.claim("wtest"))
    else:
        worker.run(store.claim("wtest"))
    assert store.get(stopping, None)["status"] != "done"


def test_a_dispatch_order_claims_its_mode_and_says_what_came_of_it(cfg, worker):
    """``take`` (a Procrastinate ticket, judge.service.dispatch): graded, empty (nothing of that
    mode queued) or wait (some queued, but the fair share passes their client over for now)."""
    from judge.service.idle import IdleWorkers
    import multiprocessing as mp

    store, ctx = worker.store, mp.get_context("spawn")
    idle, busy = IdleWorkers(ctx, 1), ctx.Value("i", 0)
    a1, a2 = (store.add("a", "glm5_mis", "submit", REF, queue_max=10) for _ in range(2))
    b1 = store.add("b", "glm5_mis", "submit", REF, queue_max=10)
    assert store.claim("other1").id == a1 and store.claim("other2").id == b1
    assert worker.take("run", idle, busy) == ("empty", None)
    assert worker.take("submit", idle, busy) == ("wait", None)  # a holds its share while b is running
    store.fail(a1, "gone")
    real = store.claim

    def away(*a, **kw):
        raise store.errors("database is locked")

    store.claim = away  # the database is away: the ticket is kept (it waits), nothing claimed
    assert worker.take("submit", idle, busy) == ("wait", None)
    store.claim = real
    assert worker.take("submit", idle, busy) == ("graded", a2)
    assert store.get(a2, None)["status"] == "done" and busy.value == 0
