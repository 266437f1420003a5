"""Every exercise's experiment computes metrics only; its plots are views of them.

Under the judge, T3 runs ``experiment.run(sub, None)`` and, after the verdict, the judge writes
``metrics.json`` and the exercise's views (``views/*.vl.json``, ``judge.views``) bound to them.
By hand, ``run(impl, out_dir)`` writes the same files with the learner's data alone. The metrics
a wrong submission can produce (NaN, inf, empty lists) must still give views (nulls, counted)
rather than a crash.
"""

from __future__ import annotations

import json
import math
import types
from pathlib import Path

import pytest
import torch

from judge import views
from judge.exercise import discover, load_module

EXERCISES = discover()
_METRICS: dict[str, dict] = {}


def _reference_metrics(slug: str) -> dict:
    if slug not in _METRICS:
        ex = EXERCISES[slug]
        _METRICS[slug] = ex.experiment.run(ex.ref, None)
    return json.loads(json.dumps(_METRICS[slug]))  # a fresh copy: the views must not need the original


def _map_floats(x, f):
    if isinstance(x, dict):
        return {k: _map_floats(v, f) for k, v in x.items()}
    if isinstance(x, list):
        return [_map_floats(v, f) for v in x]
    if isinstance(x, float):
        return f(x)
    return x


def _empty_lists(x):
    if isinstance(x, dict):
        return {k: _empty_lists(v) for k, v in x.items()}
    return [] if isinstance(x, list) else x


def _check_written(slug, names, out_dir):
    found = views.exercise_views(EXERCISES[slug].root)
    assert names == ["metrics.json"] + [v.file_name for v in found], names
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(names), "every file written is named"
    for view in found:
        spec = json.loads((out_dir / view.file_name).read_text())
        assert set(spec["datasets"]) == {n for n, _ in view.datasets}
        for rows in spec["datasets"].values():
            assert all(r["source"] == "yours" for r in rows)  # by hand: your data alone


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_run_by_hand_writes_the_metrics_and_the_views(slug, tmp_path):
    experiment = EXERCISES[slug].experiment
    metrics = _reference_metrics(slug)
    names = views.save(EXERCISES[slug].experiment_path, metrics, tmp_path / "out")  # what run(impl, out) calls
    _check_written(slug, names, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == metrics
    again = views.save(EXERCISES[slug].experiment_path, metrics, tmp_path / "again")  # same metrics, same bytes
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes(), name
    assert "plot" not in vars(experiment) and "save_views" in vars(experiment)  # metrics only: no drawing


@pytest.mark.parametrize("odd", ["nan", "inf", "empty_lists"])
@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_views_survive_odd_metrics(slug, odd, tmp_path):
    """A wrong submission's metrics: every float NaN (or +-inf), or every list empty."""
    metrics = _reference_metrics(slug)
    if odd == "nan":
        metrics = _map_floats(metrics, lambda v: math.nan)
    elif odd == "inf":
        metrics = _map_floats(metrics, lambda v: math.inf if v >= 0 else -math.inf)
    else:
        metrics = _empty_lists(metrics)
    found = views.exercise_views(EXERCISES[slug].root)
    names, told = views.write(found, metrics, tmp_path)
    _check_written(slug, names, tmp_path)
    if odd != "empty_lists":  # every float the views read is now null, and the learner is told
        assert told and "not finite numbers" in told[0]


# --- guided runs: a toy of sequential steps checked along the reference's trajectory ---------------
# An exercise with ``tests/_guide.py`` (the judge's fast path; experiment.py stays the plain run)
# has ``run(experiment, impl, None, guide=trajectory(experiment, ref))``: every step's call goes
# out at once (one batch, not a round trip per step) and each step is checked against the
# reference's next state; a run that strays is trained step by step. Per exercise: the
# step-by-step function, and the function whose answer a step uses.
GUIDED = {"cispo": ("_train", "cispo_loss"), "glm5_mis": ("stale_bandit", "offpolicy_loss"),
          "grpo": ("_train", "grpo_loss"), "score_centering": ("_run", "sc_policy_loss")}
WRITTEN = 1  # the loss's argument a test writes into: old/rollout log-probs, saved by no backward
SHARED = {"glm5_mis", "grpo"}  # toys that hand one input to several steps' calls
SOLUTIONS = Path(__file__).parent / "solutions"


def _guide_path(slug: str) -> Path:
    return EXERCISES[slug].root / "tests" / "_guide.py"


GUIDES = {slug: load_module(_guide_path(slug), f"_test_{slug}_guide") for slug in GUIDED}


def test_guided_experiments_are_the_ones_listed():
    assert sorted(s for s in EXERCISES if _guide_path(s).is_file()) == sorted(GUIDED)
    for slug in GUIDED:  # the learner's experiment.py keeps none of the fast path
        source = EXERCISES[slug].experiment_path.read_text()
        assert "trajectory" not in source and "guide" not in source.replace("tests/_guide.py", "")


def _guide(slug: str):
    ex = EXERCISES[slug]
    return GUIDES[slug].trajectory(ex.experiment, ex.ref)


def _guided_run(experiment, impl, guide):
    slug = next(s for s in GUIDED if EXERCISES[s].experiment is experiment)
    return GUIDES[slug].run(experiment, impl, None, guide=guide)


def _impls(slug: str) -> dict:
    ex = EXERCISES[slug]
    out = {"reference": ex.ref, "independent": load_module(SOLUTIONS / f"{slug}_independent.py",
                                                          f"_test_{slug}_independent")}
    for w in ex.wrong_solutions():
        out[w.label] = w.load(f"_test_{slug}_wrong_{w.name}")
    return out


def _count_steps(monkeypatch, experiment, name: str) -> list:
    """Count calls of the step-by-step function ``name`` (one entry per call), until undone."""
    original = getattr(experiment, name)
    stepped: list = []
    monkeypatch.setattr(experiment, name, lambda *a, **k: stepped.append(1) or original(*a, **k))
    return stepped


def _with_loss(ex, loss: str, fn):
    """The reference with its function ``loss`` replaced by ``fn``."""
    impl = types.SimpleNamespace(**{n: getattr(ex.ref, n) for n in ex.function_names})
    setattr(impl, loss, fn)
    return impl


def _outcome(experiment, impl, guide=None):
    try:
        return experiment.run(impl, None) if guide is None else _guided_run(experiment, impl, guide)
    except Exception as e:  # noqa: BLE001 - a wrong solution's toy may raise: the same way both times
        return f"{type(e).__name__}: {e}"


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 * max(1.0, abs(b))
    return a == b


@pytest.mark.parametrize("slug", sorted(GUIDED))
def test_a_guided_run_gives_the_metrics_of_the_step_by_step_run(slug, monkeypatch):
    """The reference, an independent correct solution and every known-wrong one: the same metrics
    (or the same error) guided or not; the correct ones never fall back to stepping."""
    experiment = EXERCISES[slug].experiment
    step_by_step, _ = GUIDED[slug]
    guide = _guide(slug)
    fell_back = []
    for name, impl in _impls(slug).items():
        plain = _outcome(experiment, impl)
        with monkeypatch.context() as m:
            stepped = _count_steps(m, experiment, step_by_step)
            guided = _outcome(experiment, impl, guide=guide)
        assert _same(plain, guided), f"{name}: the guided run differs from the step-by-step run"
        if name in ("reference", "independent"):
            assert not stepped, f"{name} strayed from the reference's trajectory"
        elif stepped:
            fell_back.append(name)
    assert fell_back, "no known-wrong solution strays in the toy: the fallback went untested"


@pytest.mark.parametrize("slug", sorted(GUIDED))
def test_a_run_that_strays_slightly_is_trained_step_by_step(slug, monkeypatch):
    """A loss off by one part in a million stays within T3's tolerances, but its steps leave the
    reference's trajectory: it is judged by its own step-by-step run, not by the guide's."""
    ex = EXERCISES[slug]
    experiment, (step_by_step, loss) = ex.experiment, GUIDED[slug]
    impl = _with_loss(ex, loss, lambda *a, **k: getattr(ex.ref, loss)(*a, **k) * (1 + 1e-6))
    guide = _guide(slug)
    with monkeypatch.context() as m:
        stepped = _count_steps(m, experiment, step_by_step)
        guided = _guided_run(experiment, impl, guide)
    assert stepped == [1]
    assert _same(guided, experiment.run(impl, None))


@pytest.mark.parametrize("slug", sorted(GUIDED))
def test_a_guide_of_another_shape_is_not_used(slug, monkeypatch):
    experiment, (step_by_step, _) = EXERCISES[slug].experiment, GUIDED[slug]
    guide = _guide(slug)
    stepped = _count_steps(monkeypatch, experiment, step_by_step)
    _guided_run(experiment, EXERCISES[slug].ref, guide[:-1])
    assert stepped == [1]


class _AsInTheSandbox:
    """An implementation called as the judge calls a sandboxed one: in a ``batch``, a call sees
    its arguments as they were when it was made, and what it wrote into them reaches the
    caller's tensors when its answer is read."""

    def __init__(self, impl):
        self._impl = impl

    def __getattr__(self, name):
        return getattr(self._impl, name)

    def __judge_batch__(self):
        return self

    def __enter__(self):
        return _DeferredCalls(self._impl)

    def __exit__(self, *exc):
        return None


class _DeferredCalls:
    def __init__(self, impl):
        self._impl = impl

    def __getattr__(self, name):
        fn = getattr(self._impl, name)

        def call(*args, **kwargs):
            sent = [a.detach().clone() if isinstance(a, torch.Tensor) and not a.requires_grad else a
                    for a in args]
            out = fn(*sent, **kwargs)

            class Answer:
                @property
                def value(self):
                    for a, s in zip(args, sent):
                        if s is not a and not torch.equal(a, s):
                            with torch.no_grad():
                                a.copy_(s)
                    return out
            return Answer()
        return call


@pytest.mark.parametrize("slug", sorted(GUIDED))
def test_a_run_that_writes_into_its_inputs_is_the_step_by_step_run(slug, monkeypatch):
    """Guided calls go out before earlier answers are read, so a call that writes into an input
    that later calls also get (grpo: an iteration's advantages and old_logp, the mask; glm5_mis:
    a window's snapshot, the mask) would change what they see: such a run is stepped
    (score_centering gives each call its own inputs). Either way the metrics are the
    step-by-step run's."""
    ex = EXERCISES[slug]
    experiment, (step_by_step, loss) = ex.experiment, GUIDED[slug]

    def writes(*args, **kwargs):
        out = getattr(ex.ref, loss)(*args, **kwargs)
        # after computing (its own answer is right): the next call given it sees the damage
        with torch.no_grad():
            args[WRITTEN].add_(0.25)
        return out

    impl = _AsInTheSandbox(_with_loss(ex, loss, writes))
    guide = _guide(slug)
    with monkeypatch.context() as m:
        stepped = _count_steps(m, experiment, step_by_step)
        guided = _outcome(experiment, impl, guide=guide)
    assert _same(guided, _outcome(experiment, impl))
    if slug in SHARED:
        assert stepped == [1]


def _reshaped(ex, shape: tuple[int, ...]):
    """The reference with every function's tensor answer replaced by one of ``shape``."""
    def wrap(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            return torch.ones(shape, dtype=out.dtype) if isinstance(out, torch.Tensor) else out
        return call
    return types.SimpleNamespace(**{f.name: wrap(getattr(ex.ref, f.name)) for f in ex.functions})


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_an_answer_of_the_wrong_shape_is_feedback_that_names_it(slug, tmp_path):
    """Every toy checks an answer's shape before it makes anything of it: T3 fails with a message
    naming the function and the shapes, never a TypeError of the toy's (a judge traceback)."""
    from judge.grading import grade
    from judge.runner import run_tiers
    from judge.testing import Context

    ex = EXERCISES[slug]
    ctx = Context(seed=3, out_dir=tmp_path, exercise=slug)
    results, stopped = run_tiers(ex, _reshaped(ex, (1, 7, 3)), ctx, tiers=["T3"])
    t3 = next(r for r in results if r.tier == "T3")
    assert stopped is None and t3.status == "failed", [(t.status, t.message) for t in t3.tests]
    assert all(t.status == "failed" for t in t3.tests)
    assert any("returned shape (1, 7, 3), expected" in t.message for t in t3.tests), \
        [t.message for t in t3.tests]
    assert grade(ex, ex.solution_path.read_text(), sandbox=None, tiers=["T3"]).verdict == "accepted"
