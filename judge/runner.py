"""Collect an exercise's tier tests and run them against an implementation.

Test files are loaded once per process (they are trusted, and cheap to keep); each test function
gets its fixtures by parameter name. A ``Feedback``/``AssertionError`` is a failed test; a
``SubmissionFailure`` (time, memory, exit) stops the whole run; anything else is a test that
could not complete, logged with its traceback and shown to the learner without it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from pathlib import Path
from typing import Any, Callable

from judge.caps import MESSAGE_CAP, clip
from judge.errors import ExerciseError, RemoteException, SubmissionFailure
from judge.exercise import Exercise, Limits, load_module
from judge.models import TestResult, TierResult
from judge.readonly import InProcess
from judge.testing import Context, Feedback, is_visible
from judge.views import exercise_views, reference_json, write as write_views

log = logging.getLogger("judge.runner")


def collect(exercise: Exercise) -> dict[str, list[Callable]]:
    """Tier → its test functions, in file and definition order."""
    out: dict[str, list[Callable]] = {}
    for tier, files in exercise.test_files().items():
        fns: list[Callable] = []
        for path in files:
            mod = load_module(path, f"_judge_tests_{exercise.slug}_{path.stem}")
            tests = [(name, fn) for name, fn in vars(mod).items()
                     if name.startswith("test_") and inspect.isfunction(fn)
                     and fn.__module__ == mod.__name__]
            tests.sort(key=lambda p: p[1].__code__.co_firstlineno)
            fns += [fn for _, fn in tests]
        out[tier] = fns
    return out


@functools.lru_cache(maxsize=4096)
def _parameters(fn: Callable) -> tuple[str, ...]:
    """A test's parameter names (tests are loaded once per process: so are their signatures)."""
    return tuple(inspect.signature(fn).parameters)


def _fixtures(fn: Callable, available: dict[str, Any]) -> dict[str, Any]:
    params = _parameters(fn)
    unknown = [p for p in params if p not in available]
    if unknown:
        raise ExerciseError(f"{fn.__module__}.{fn.__name__} asks for unknown fixtures {unknown}; "
                            f"available: {sorted(available)}")
    return {p: available[p] for p in params}


class DeferredPlots:
    """The experiment module as T3 tests see it under the judge.

    ``run(impl, out_dir)`` runs the toy through the submission, writing nothing, and records the
    metrics; once the verdict is out the judge writes them (``metrics.json``) with the
    exercise's views bound to them and to the reference's (``draw_pending``), so the learner does
    not wait for it. The metrics are measured before they are kept (``bounded_copy``): over the
    exercise's ``metrics_bytes`` they fail the test, and nothing of them is copied or written.
    """

    def __init__(self, module: Any, ctx: Context, limits: Limits = Limits(), exercise: Exercise | None = None):
        self._module, self._ctx, self._limits, self._exercise = module, ctx, limits, exercise

    def run(self, impl: Any, out_dir: Any = None, *args: Any, **kwargs: Any) -> Any:
        metrics = self._module.run(impl, None, *args, **kwargs)
        kept = bounded_copy(metrics, self._limits.metrics_bytes)
        if out_dir is not None:
            self._ctx.pending_plots.append((self._exercise, kept, out_dir, self._limits))
        return metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def bounded_copy(value: Any, limit: int) -> Any:
    """A copy of a metrics tree (dicts, lists, tuples, numbers, strings) whose JSON would take at
    most ``limit`` bytes; a larger one is ``Feedback``, found before more than ``limit`` bytes'
    worth of it is walked (the copy a wrong answer's shape would make costs nothing)."""
    left = [limit]

    def spend(n: int) -> None:
        left[0] -= n
        if left[0] < 0:
            raise Feedback(f"the experiment's metrics are larger than the {limit:,}-byte limit: a value "
                           f"your functions returned is much larger than the toy's (check the shapes "
                           f"they return)")

    def go(v: Any) -> Any:
        t = type(v)
        if t is float or t is int:
            spend(24)
            return v
        if v is None or t is bool:
            spend(5)
            return v
        if t is str:
            spend(len(v) + 2)
            return v
        if t is list or t is tuple:
            spend(2 + len(v))
            out = [go(x) for x in v]
            return out if t is list else tuple(out)
        if t is dict:
            spend(2 + len(v))
            return {go(k): go(x) for k, x in v.items()}
        spend(64)  # anything else (the experiment's own objects): kept as it is
        return v

    return go(value)


def draw_pending(ctx: Context) -> list[str]:
    """Write what T3 recorded: ``metrics.json`` and one ``<view>.vl.json`` per view of the
    exercise (``judge.views``: the submission's data beside the reference's, inline); returns
    problems to tell the learner (values that are not finite numbers, a view that could not be
    made). A file over the exercise's ``artifact_bytes`` is removed, and said so."""
    problems: list[str] = []
    for exercise, metrics, out_dir, limits in ctx.pending_plots:
        try:
            views = exercise_views(exercise.root) if exercise is not None else ()
            _, told = write_views(views, metrics, Path(out_dir),
                                  (lambda v, ex=exercise: reference_json(v, ex)) if exercise is not None else None)
            problems += told
        except Exception as e:  # noqa: BLE001 - a plot is a nicety; the verdict stands
            log.exception("could not write the views of %s", ctx.exercise)
            problems.append(f"the plots could not be made: {type(e).__name__}: {e}")
        problems += cap_artifacts(Path(out_dir), limits.artifact_bytes)
    ctx.pending_plots.clear()
    return problems


def cap_artifacts(out_dir: Path, limit: int) -> list[str]:
    """Remove the files in ``out_dir`` over ``limit`` bytes; returns what was removed, and why."""
    removed = []
    for name, path in artifacts_in(out_dir):
        size = path.stat().st_size
        if size > limit:
            path.unlink()
            removed.append(f"{name} was not kept: {size:,} bytes, over the {limit:,}-byte limit "
                           f"for one artifact")
    return removed


def run_tiers(exercise: Exercise, sub: Any, ctx: Context, *, tiers: list[str],
              on_test: Callable[[str, TestResult], None] | None = None) -> tuple[list[TierResult], SubmissionFailure | None]:
    """Run the selected tiers; returns the results and the failure that stopped them, if any."""
    if not hasattr(sub, "__judge_violations__"):  # in-process: its inputs are kept pristine too
        sub = InProcess(sub, exercise.functions)
    available = {"sub": sub, "ctx": ctx, "ref": exercise.ref, "oracle": exercise.oracle,
                 "experiment": DeferredPlots(exercise.experiment, ctx, exercise.limits, exercise)}
    hide_messages = ctx.mode == "submit" and exercise.hidden_feedback == "name"
    results: list[TierResult] = []
    stopped: SubmissionFailure | None = None
    for tier, fns in collect(exercise).items():
        tr = TierResult(tier=tier, status="skipped")
        results.append(tr)
        if tier not in tiers:
            continue
        t_tier = time.perf_counter()
        for fn in fns:
            visible = tier == "T3" or is_visible(fn)
            if ctx.mode == "run" and not visible:
                continue
            name = fn.__name__
            if stopped is not None:
                tr.tests.append(TestResult(name=name, status="skipped", visible=visible,
                                           message=f"not run: {stopped.message}"))
                continue
            t0 = time.perf_counter()
            status, message = "passed", ""
            try:
                fn(**_fixtures(fn, available))
            except SubmissionFailure as e:
                stopped, status, message = e, "failed", e.message
            except RemoteException as e:
                status, message = "failed", str(e)
            except (Feedback, AssertionError) as e:
                status, message = "failed", str(e) or f"{name} failed"
            except ExerciseError:
                raise
            except Exception as e:  # noqa: BLE001 - the test could not complete
                log.exception("test %s of %s could not complete", name, exercise.slug)
                status, message = "error", f"the test could not complete: {type(e).__name__}: {e}"
            if stopped is None:
                # Answers the test left unread are its own, and so are their writes, whether it
                # passed or failed: read them now, so that none is counted in the next test (how
                # many a failed test had read depends on timing; the verdict must not).
                try:
                    _settle(sub)
                except SubmissionFailure as e:
                    stopped, status, message = e, "failed", e.message
            writes = sub.__judge_violations__()
            if writes and stopped is None:  # a read-only input written, even if the test went on
                status, message = "failed", writes[0] + (f"\n  ({len(writes) - 1} more calls of this "
                                                         f"test wrote into their inputs)" if len(writes) > 1 else "")
            if status != "passed" and hide_messages and not visible and stopped is None:
                message = "a hidden test failed"
            result = TestResult(name=name, status=status, message=clip(message, MESSAGE_CAP),
                                visible=visible, duration_ms=round((time.perf_counter() - t0) * 1000, 2))
            tr.tests.append(result)
            if on_test:
                on_test(tier, result)
        tr.duration_ms = round((time.perf_counter() - t_tier) * 1000, 2)
        ran = [t for t in tr.tests if t.status != "skipped"]
        if not ran:
            tr.status = "skipped"
        elif any(t.status == "failed" for t in ran):
            tr.status = "failed"
        elif any(t.status == "error" for t in ran):
            tr.status = "error"
        else:
            tr.status = "passed"
    return results, stopped


def _settle(sub) -> None:
    """Read the answers of a batch still in flight (the sandbox's proxy; a module has none)."""
    settle = getattr(type(sub), "settle", None)
    if settle is not None:
        settle(sub)


def artifacts_in(out_dir: Path | None) -> list[tuple[str, Path]]:
    """The regular files T3 wrote (trusted code writes them; links are still never followed)."""
    if out_dir is None or not out_dir.is_dir():
        return []
    return [(p.name, p) for p in sorted(out_dir.iterdir())
            if p.is_file() and not p.is_symlink()]
