"""judge.runner: a test fails for a read-only input its calls wrote even when it went on; T3's
metrics are measured before they are kept, the plots drawn within a time budget, and an
artifact over its size limit removed."""

from __future__ import annotations

import json
import types

import pytest
import torch

from judge import runner
from judge.exercise import Function, Limits
from judge.svgplot import save_figures
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


def test_plots_are_drawn_within_the_budget_and_oversized_artifacts_removed(tmp_path):
    def plot(metrics, out_dir):
        (out_dir / "metrics.json").write_text(json.dumps(metrics))
        (out_dir / "big.txt").write_text("x" * 5000)

        def slow(fig, m):  # a drawing that would go on for minutes: the budget stops it
            ax = fig.subplots()
            while True:
                ax.plot([0.0, 1.0], [0.0, 1.0])
                ax.render((0, 0, 100, 100), "c")

        return save_figures(out_dir, metrics, [("slow.svg", (3, 2), slow)])

    module = types.SimpleNamespace(run=lambda impl, out_dir=None: {"loss": 1.0}, plot=plot)
    ctx = Context(seed=0, out_dir=tmp_path)
    plots = runner.DeferredPlots(module, ctx, Limits(plot_seconds=0.2, artifact_bytes=4096))
    assert plots.run(None, tmp_path) == {"loss": 1.0} and not (tmp_path / "metrics.json").exists()
    problems = runner.draw_pending(ctx)  # without the budget, this would never return
    assert "could not draw slow.svg" in (tmp_path / "slow.svg").read_text()
    assert problems == ["big.txt was not kept: 5,000 bytes, over the 4,096-byte limit for one artifact"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "slow.svg"]
