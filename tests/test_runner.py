"""judge.runner: a test fails for a read-only input its calls wrote even when it went on, or
failed with answers unread (never the next test); T3's
metrics are measured before they are kept, written after the verdict with the exercise's views
bound to them, and an artifact over its size limit removed."""

from __future__ import annotations

import json
import types

import pytest
import torch

from judge import runner
from judge.exercise import Function, Limits
from judge.testing import Context, Feedback, visible


def _exercise(**limits):
    return types.SimpleNamespace(slug="toy", ref=None, oracle=None, experiment=None, hidden_feedback="message",
                                 limits=Limits(**limits), functions=[Function("f", "f(x, scale) -> Tensor")])


def test_a_test_that_swallows_the_write_still_fails_for_it(monkeypatch):
    def test_goes_on(sub):
        try:
            sub.f(torch.zeros(2), 2.0)
        except Feedback:
            pass  # a test (or a toy) that tries another way after a failed call

    def test_clean(sub):
        sub.f(torch.ones(2), 0.0)

    monkeypatch.setattr(runner, "collect", lambda ex: {"T0": [visible(test_goes_on), visible(test_clean)]})
    impl = types.SimpleNamespace(f=lambda x, scale: x.add_(1) * scale if scale else x * 0)
    results, stopped = runner.run_tiers(_exercise(), impl, Context(seed=0), tiers=["T0"])
    goes_on, clean = results[0].tests
    assert stopped is None and goes_on.status == "failed" and clean.status == "passed"
    assert "f modified its input(s) in place:\n  `x` written at 2 of 2 positions" in goes_on.message


class _Unread:
    """A proxy whose batched answers are read later (``settle``), as the sandbox's are: a write
    is reported when its answer is read, and reading it is a matter of timing."""

    def __init__(self):
        self.unread, self.seen = [], []

    def f(self, x, scale):
        self.settle()
        self.unread.append(f"f modified its input(s) in place: `x` (scale {scale})")  # the answer, unread
        return x * scale

    def settle(self):
        self.seen += self.unread
        self.unread = []

    def __judge_violations__(self):
        seen, self.seen = self.seen, []
        return seen


def test_writes_of_a_failed_tests_unread_answers_are_its_own_not_the_next_tests(monkeypatch):
    def test_fails_with_answers_unread(sub):
        sub.f(torch.zeros(2), 1.0)
        sub.f(torch.zeros(2), 2.0)
        raise Feedback("a value was wrong")  # its second answer is still unread

    def test_next(sub):
        pass

    monkeypatch.setattr(runner, "collect", lambda ex: {"T0": [visible(test_fails_with_answers_unread),
                                                              visible(test_next)]})
    results, stopped = runner.run_tiers(_exercise(), _Unread(), Context(seed=0), tiers=["T0"])
    failed, following = results[0].tests
    assert stopped is None and failed.status == "failed"
    assert "(scale 1.0)" in failed.message and "1 more calls of this test" in failed.message
    assert following.status == "passed"


def test_metrics_are_measured_before_they_are_copied():
    metrics = {"loss": 0.5, "grad": [[1.0, 2.0]], "name": "toy", "ok": True, "n": None, "t": (1, 2)}
    kept = runner.bounded_copy(metrics, 1 << 20)
    assert kept == metrics and kept["grad"] is not metrics["grad"]  # a copy: the plots get their own
    with pytest.raises(Feedback, match="larger than the 1,048,576-byte limit"):
        runner.bounded_copy({"ratios": [[0.0] * 100_000] * 1000}, 1 << 20)  # 10^8 values: stops early


def test_a_toy_whose_metrics_are_too_large_fails_and_nothing_is_kept(tmp_path):
    module = types.SimpleNamespace(run=lambda impl, out_dir=None: {"s": [1.0] * 100_000},
                                   plot=lambda m, out: None)
    ctx = Context(seed=0, out_dir=tmp_path)
    with pytest.raises(Feedback, match="metrics are larger"):
        runner.DeferredPlots(module, ctx, Limits(metrics_bytes=10_000)).run(None, tmp_path)
    assert ctx.pending_plots == []


def test_metrics_and_views_are_written_after_the_verdict_and_oversized_ones_removed(tmp_path):
    (tmp_path / "ex" / "views").mkdir(parents=True)
    for name, n in (("small", 3), ("big", 2000)):
        (tmp_path / "ex" / "views" / f"{name}.vl.json").write_text(json.dumps({
            "title": name, "description": "the loss per step",
            "usermeta": {"judge": {"datasets": {"d": [{"columns": {"i": "#0", "y": f"{name}[#0]"}}]}}},
            "data": {"name": "d"}, "mark": "line",
            "encoding": {"x": {"field": "i", "type": "quantitative", "title": "step (updates)"}}}))
    exercise = types.SimpleNamespace(slug="toy", root=tmp_path / "ex")
    metrics = {"small": [1.0, float("nan"), 3.0], "big": [0.5] * 2000}
    module = types.SimpleNamespace(run=lambda impl, out_dir=None: metrics)
    ctx = Context(seed=0, out_dir=tmp_path / "out", exercise="toy")
    reference = {"small": [2.0, 2.0, 2.0], "big": []}
    memo_key = ("toy", "t3")
    from judge.testing import _MEMO
    _MEMO[memo_key] = reference
    try:
        plots = runner.DeferredPlots(module, ctx, Limits(artifact_bytes=20_000), exercise)
        assert plots.run(None, ctx.out_dir) is metrics and not ctx.out_dir.exists()  # nothing before the verdict
        problems = runner.draw_pending(ctx)
    finally:
        _MEMO.pop(memo_key)
        for key in [k for k in _MEMO if k[:2] in (("toy", "views"), ("toy", "views-json"))]:
            _MEMO.pop(key)
    assert sorted(p.name for p in ctx.out_dir.iterdir()) == ["metrics.json", "small.vl.json"]
    assert problems[0].startswith("1 value(s) your experiment produced for the plots are not finite")
    assert problems[1].startswith("big.vl.json was not kept: ") and "over the 20,000-byte limit" in problems[1]
    spec = json.loads((ctx.out_dir / "small.vl.json").read_text())
    assert [(r["source"], r["y"]) for r in spec["datasets"]["d"]] == [
        ("yours", 1.0), ("yours", None), ("yours", 3.0), ("reference", 2.0), ("reference", 2.0), ("reference", 2.0)]
    assert ctx.pending_plots == []
