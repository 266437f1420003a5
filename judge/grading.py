"""``grade(...)``: the one library call behind ``judge local``, the service and the benchmarks."""

from __future__ import annotations

import gc
import logging
import secrets
import time
import types
from pathlib import Path
from typing import Callable

from judge.box import replies
from judge.caps import cap_verdict
from judge.errors import JudgeError, MalformedReply, SubmissionFailure
from judge.exercise import TIERS, Exercise
from judge.models import (Artifact, Resources, SubmissionError, TestResult, TierResult,
                          Verdict)
from judge.proxy import SubmissionProxy
from judge.runner import artifacts_in, draw_pending, run_tiers
from judge.box.sandbox import Sandbox
from judge.testing import Context
from sandbox import wire

log = logging.getLogger("judge.grading")
MEDIA_TYPES = {".png": "image/png", ".json": "application/json", ".svg": "image/svg+xml",
               ".csv": "text/csv", ".txt": "text/plain", ".html": "text/html"}


def warm(exercises) -> None:
    """Load everything grading needs once per process, so no grading pays for it: each
    exercise's tests, reference, oracle, experiment and views (``judge.views``: parsed once;
    the reference's layer is computed by the first grading that writes them, or by T3 already)."""
    import torch

    from judge.runner import collect
    from judge.views import exercise_views

    torch.set_num_threads(1)  # tier tests use small tensors: threads only oversubscribe the cores
    for ex in exercises:
        collect(ex)
        ex.ref, ex.oracle, ex.experiment  # noqa: B018 - cached properties: load them now
        exercise_views(ex.root)
    # What is loaded now lives as long as the process: keep it out of the garbage collector's
    # full passes (~90 ms over ~230k objects, which would land in some grading as a stall).
    gc.freeze()


def choose_seed(exercise: Exercise, mode: str, seed: int | None) -> int:
    """Run mode replays the visible cases (fixed seed); submit mode draws fresh inputs."""
    if seed is not None:
        return int(seed)
    return exercise.run_seed if mode == "run" else secrets.randbelow(2**31)


def grade(exercise: Exercise, source: str, *, sandbox: Sandbox | None, mode: str = "submit",
          seed: int | None = None, tiers: list[str] | None = None, out_dir: Path | None = None,
          on_test: Callable[[str, TestResult], None] | None = None,
          on_verdict: Callable[[Verdict], None] | None = None, diagnose: bool = True) -> Verdict:
    """Grade ``source`` (a submission's text) on ``exercise``.

    The T3 artifacts (metrics.json, one Vega-Lite spec per view) are written after the verdict
    is known; nothing is drawn here (``judge.views_render`` draws, in the caller's process).
    When there are artifacts to write,
    ``on_verdict`` first receives the verdict without them (``artifacts_pending`` set), so a
    service can answer at once; the returned verdict lists the artifacts.

    ``sandbox=None`` runs the submission in this process, with no isolation: for the reference,
    for authors and for the benchmark's floor, never for untrusted code.

    A rejected submission's failed tests name the known mistake they reproduce, if any
    (``judge.diagnose``, in this trusted process; ``diagnose=False`` skips it).
    """
    if mode not in ("run", "submit"):
        raise ValueError(f"mode must be 'run' or 'submit', got {mode!r}")
    tiers = list(tiers or TIERS)
    seed = choose_seed(exercise, mode, seed)
    # Python ignores a byte-order mark at the start of a file (editors on Windows write one), but
    # compile() of a str does not ("invalid non-printable character U+FEFF"): a submission's
    # text means what its file would
    source = source.removeprefix("\ufeff")
    t_start = time.perf_counter()
    verdict = Verdict(exercise=exercise.slug, verdict="error", mode=mode, seed=seed)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(seed=seed, mode=mode, out_dir=out_dir, exercise=exercise.slug)
    job = sub = None
    try:
        t_load = time.perf_counter()
        if sandbox is None:
            sub = _load_in_process(exercise, source)
            verdict.sandbox = ["none (in-process)"]
        else:
            job = sandbox.open_job(exercise.limits)
            verdict.sandbox = job.layers
            sub = _load_in_sandbox(exercise, source, job)
        verdict.timings.load_ms = _ms(t_load)
        t_grade = time.perf_counter()
        verdict.tiers, stopped = run_tiers(exercise, sub, ctx, tiers=tiers, on_test=on_test)
        verdict.timings.grading_ms = _ms(t_grade)
        if stopped is not None:
            verdict.error = SubmissionError(kind=stopped.kind, message=stopped.message)
        verdict.resources.calls = getattr(sub, "calls", 0)
        verdict.resources.round_trips = getattr(sub, "round_trips", 0)
        ran = [t for t in verdict.tiers if t.status != "skipped"]
        ok = ran and all(t.status == "passed" for t in ran) and stopped is None
        verdict.verdict = "accepted" if ok else "rejected"
    except SubmissionFailure as e:
        verdict.verdict = "rejected"
        verdict.error = SubmissionError(kind=e.kind, message=e.message)
        verdict.tiers = [TierResult(tier=t, status="skipped") for t in TIERS]
    except JudgeError as e:
        log.exception("grading %s failed", exercise.slug)
        verdict.verdict = "error"
        verdict.error = SubmissionError(kind="internal", message=e.message)
    except Exception as e:  # noqa: BLE001 - a judge bug: logged, reported, never blamed on the learner
        log.exception("grading %s failed", exercise.slug)
        verdict.verdict = "error"
        verdict.error = SubmissionError(kind="internal", message=f"the judge failed: {type(e).__name__}: {e}")
    finally:
        if job is not None:
            _end_job(job, sub, verdict)
    if diagnose and verdict.verdict == "rejected" and verdict.error is None:
        from judge.diagnose import diagnose as name_misconceptions

        t_diagnosis = time.perf_counter()
        name_misconceptions(exercise, verdict)
        verdict.timings.diagnosis_ms = _ms(t_diagnosis)
    verdict.timings.total_ms = _ms(t_start)
    cap_verdict(verdict)
    if ctx.pending_plots and on_verdict is not None:
        on_verdict(verdict.model_copy(update={"artifacts_pending": True}, deep=True))
    t_render = time.perf_counter()
    for problem in draw_pending(ctx):
        verdict.output += ("\n" if verdict.output else "") + f"[judge] {problem}"
    verdict.timings.render_ms = _ms(t_render)
    verdict.artifacts = [Artifact(name=name, path=str(path), size=path.stat().st_size,
                                  media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"))
                         for name, path in artifacts_in(out_dir)]
    return cap_verdict(verdict)


def _end_job(job, sub, verdict: Verdict) -> None:
    """Read what a test left unread, then end the job: whatever the reading raised (a malformed
    or late answer, a BaseException of any kind), the child is killed, reaped and wiped."""
    try:
        if isinstance(sub, SubmissionProxy):
            try:  # a batch a test sent but never read: its reply comes before the exit report
                sub.settle()
            except SubmissionFailure as e:  # an answer no test read still counts against it
                if verdict.error is None:
                    verdict.verdict = "rejected"
                    verdict.error = SubmissionError(kind=e.kind, message=e.message)
            except Exception:  # noqa: BLE001 - the verdict already says what went wrong
                pass
    finally:
        res = job.close()
        verdict.resources = Resources(cpu_ms=res.cpu_ms, peak_rss_mb=round(res.maxrss_kb / 1024, 1),
                                      wall_ms=res.wall_ms, calls=verdict.resources.calls,
                                      round_trips=verdict.resources.round_trips)
        verdict.output = job.output


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


def _load_in_sandbox(exercise: Exercise, source: str, job) -> SubmissionProxy:
    msg = job.request({"op": "load", "source": source, "functions": exercise.function_names,
                       "spin": job.spin_seconds}, during="loading the submission", expect=replies.LOAD)
    h = msg.header  # checked: judge.box.replies.Loaded or LoadFailed
    if not h["ok"]:
        raise SubmissionFailure(h["kind"], h["message"])
    missing = h["missing"]
    if not set(missing) <= set(exercise.function_names) or len(set(missing)) != len(missing):
        job.kill()
        raise MalformedReply("the submission's process sent a malformed reply to loading the "
                             "submission: it names functions the exercise does not declare")
    if missing:
        raise SubmissionFailure("missing_function", _missing_message(exercise, missing))
    return SubmissionProxy(job, exercise.functions)


def _load_in_process(exercise: Exercise, source: str) -> types.ModuleType:
    mod = types.ModuleType("submission")
    try:
        code = compile(source, "submission.py", "exec", dont_inherit=True)
    except SyntaxError as e:
        raise SubmissionFailure("syntax_error", wire.syntax_message(e)) from None
    except ValueError as e:  # e.g. NUL bytes in the source
        raise SubmissionFailure("syntax_error", str(e)) from None
    try:
        exec(code, mod.__dict__)
    except Exception as e:  # noqa: BLE001
        raise SubmissionFailure("import_error", f"{type(e).__name__}: {e}") from None
    missing = [n for n in exercise.function_names if not callable(getattr(mod, n, None))]
    if missing:
        raise SubmissionFailure("missing_function", _missing_message(exercise, missing))
    return mod


def _missing_message(exercise: Exercise, missing: list[str]) -> str:
    sigs = {f.name: f.signature for f in exercise.functions}
    return "missing function(s): " + "; ".join(f"{m} — expected {sigs.get(m, m)}" for m in missing)
