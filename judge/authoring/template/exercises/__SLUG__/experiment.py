"""__TITLE__ toy: fit one parameter per row by gradient descent through YOUR masked_mean.

Six rows of targets y with 1, 2, 3, 5, 8 and 0 valid entries (padding holds 1000). The loss
masked_mean((theta_b - y_b)^2, mask).sum() has its minimum at theta_b = the mean of row b's valid
targets; the empty row gets no gradient and stays at 0.

    python exercises/__SLUG__/experiment.py --impl my_solution.py --out figs/

writes metrics.json and the views loss and fit (views/*.vl.json, your data) into figs/; under the
judge, T3's views show your run beside the reference's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch

from judge.views import save as save_views
from judge.testing import check_tensor

LENGTHS = (1, 2, 3, 5, 8, 0)
L = 8
STEPS = 40
LR = 0.25
PAD = 1000.0


def _targets(seed: int):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(len(LENGTHS), L, generator=g, dtype=torch.float64) + 2.0
    mask = torch.arange(L)[None, :] < torch.tensor(LENGTHS)[:, None]
    return y.masked_fill(~mask, PAD), mask


# The plots are views of the metrics: views/loss.vl.json and views/fit.vl.json are Vega-Lite specs
# whose datasets name the metrics (usermeta.judge.datasets). This file computes metrics only; the
# judge binds the submission's and the reference's into each view after the verdict (the judge's
# docs/authoring.md, "Writing a view").
def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Fit theta through ``impl.masked_mean``; returns the metrics (and writes metrics.json and the
    views to out_dir)."""
    y, mask = _targets(seed)
    theta = torch.zeros(len(LENGTHS), dtype=torch.float64, requires_grad=True)
    losses = []
    for _ in range(STEPS):
        # Check each answer's shape before anything is made of it: a wrong one is feedback that
        # names it, and a huge one costs nothing (the judge's docs/authoring.md, "T3").
        per_row = check_tensor(impl.masked_mean((theta[:, None] - y) ** 2, mask), what="masked_mean",
                               shape=(len(LENGTHS),))
        loss = per_row.sum()
        losses.append(float(loss.detach()))
        grad, = torch.autograd.grad(loss, theta)
        with torch.no_grad():
            theta -= LR * grad
    n = mask.sum(dim=1)
    target = torch.where(n > 0, torch.where(mask, y, 0.0).sum(dim=1) / n.clamp(min=1), 0.0)
    metrics = {
        "lengths": list(LENGTHS),
        "theta": [float(v) for v in theta.detach()],
        "target_means": [float(v) for v in target],
        "max_abs_error": float((theta.detach() - target).abs().max()),
        "losses": losses,
        "final_loss": losses[-1],
    }
    if out_dir is not None:
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("impl", Path(path).resolve())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines masked_mean)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    args = ap.parse_args()
    print(json.dumps({k: v for k, v in run(_load(args.impl), args.out).items() if k != "losses"}, indent=1))
