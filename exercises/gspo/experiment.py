"""GSPO toy: the analytic three-response diagnostic, run through YOUR implementation.

Three responses (clip_eps = 0.2):
  1. token log-ratios [log 2, -log 2], A = +1  -> s = 1,   inside the band, gradient -1/6 on BOTH tokens
  2. token log-ratio  [log 1.5],       A = +2  -> s = 1.5, clipped at 1+eps (no gradient)
  3. token log-ratio  [log 0.5],       A = -1  -> s = 0.5, clipped at 1-eps (no gradient)
so s = [1, 1.5, 0.5], loss = -(1 + 2.4 - 0.8)/3 = -0.866667, clip fraction 2/3. Adding an empty
fourth response with A = 5 gives loss -0.65 and gradient -1/8 on response 1.

It also sweeps one single-token response over s in (0.5, 1.5) for A = +1 and A = -1 and records
your per-response objective J(s) = -loss and its gradient, and contrasts your gradient matrix
with what token-level PPO clipping would give on the same tokens (computed here, not by you).

    python exercises/gspo/experiment.py --impl my_solution.py --out figs/

writes metrics.json and the views ratios, gradients and surrogate (*.vl.json) into figs/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

CLIP_EPS = 0.2
SWEEP = [round(0.55 + 0.1 * k, 10) for k in range(10)]  # 0.55 ... 1.45: avoids the band edges 0.8 and 1.2


def _toy(with_empty: bool = False):
    f64 = torch.float64
    old = torch.tensor([[-1.0, -1.5], [-0.7, 0.0], [-2.0, 0.0]], dtype=f64)
    log_ratio = torch.tensor([[math.log(2.0), -math.log(2.0)], [math.log(1.5), 0.0], [math.log(0.5), 0.0]],
                             dtype=f64)
    mask = torch.tensor([[True, True], [True, False], [True, False]])
    adv = torch.tensor([1.0, 2.0, -1.0], dtype=f64)
    if with_empty:
        old = torch.cat([old, torch.tensor([[-0.3, -0.4]], dtype=f64)])
        log_ratio = torch.cat([log_ratio, torch.zeros(1, 2, dtype=f64)])
        mask = torch.cat([mask, torch.tensor([[False, False]])])
        adv = torch.cat([adv, torch.tensor([5.0], dtype=f64)])
    logp = torch.where(mask, old + log_ratio, old)
    return logp, old, adv, mask


def _queue_loss(b, logp, old, adv, mask, clip_eps=CLIP_EPS):
    """Queue gspo_loss on a fresh leaf copy of logp in the batch ``b``; ``_loss_and_grad`` reads it."""
    x = logp.detach().clone().requires_grad_(True)
    return x, b.gspo_loss(x, old, adv, mask, clip_eps=clip_eps)


def _loss_and_grad(x, pending):
    loss = check_tensor(pending.value, what="gspo_loss", shape=())
    loss.backward()
    grad = x.grad if x.grad is not None else torch.zeros_like(x)
    return float(loss.detach()), grad.detach()


def _token_ppo_grad(logp, old, adv, mask, clip_eps=CLIP_EPS):
    """For contrast: token-level PPO clipping with a seq-mean-token-mean average (not GSPO)."""
    x = logp.detach().clone().requires_grad_(True)
    r = torch.exp(torch.where(mask, x - old, torch.zeros_like(x)))
    a = adv[:, None]
    per_tok = torch.minimum(r * a, r.clamp(1 - clip_eps, 1 + clip_eps) * a)
    n = mask.sum(dim=1).clamp(min=1)
    J = (torch.where(mask, per_tok, torch.zeros_like(per_tok)).sum(dim=1) / n).sum() / logp.shape[0]
    (-J).backward()
    return x.grad.detach()


def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Run the diagnostic through ``impl`` (any object with sequence_ratio and gspo_loss); write
    metrics.json and the views when ``out_dir`` is given.

    ``seed`` is accepted for the common interface; the toy is analytic and deterministic.
    """
    logp, old, adv, mask = _toy()
    logp4, old4, adv4, mask4 = _toy(with_empty=True)
    swept = []
    with batch(impl) as b:  # every call of the diagnostic is independent of the others: one round trip
        s = b.sequence_ratio(logp, old, mask)
        main = _queue_loss(b, logp, old, adv, mask)
        empty = _queue_loss(b, logp4, old4, adv4, mask4)
        for si in SWEEP:
            old1 = torch.tensor([[-1.0]], dtype=torch.float64)
            logp1 = old1 + math.log(si)
            for sign, tag in ((1.0, "pos"), (-1.0, "neg")):
                swept.append((tag, _queue_loss(b, logp1, old1, torch.tensor([sign], dtype=torch.float64),
                                               torch.tensor([[True]]))))
    s = check_tensor(s.value, what="sequence_ratio", shape=(len(adv),)).detach().to(torch.float64)
    loss, grad = _loss_and_grad(*main)
    a = adv.tolist()
    clipped = [int((ai > 0 and si > 1 + CLIP_EPS) or (ai < 0 and si < 1 - CLIP_EPS)) for ai, si in zip(a, s.tolist())]
    loss4, grad4 = _loss_and_grad(*empty)

    sweep = {"s": SWEEP, "objective_pos": [], "objective_neg": [], "grad_logp_pos": [], "grad_logp_neg": []}
    for tag, queued in swept:
        l1, g1 = _loss_and_grad(*queued)
        sweep[f"objective_{tag}"].append(-l1)
        sweep[f"grad_logp_{tag}"].append(-float(g1[0, 0]) + 0.0)

    metrics = {
        "clip_eps": CLIP_EPS,
        "ratios": [float(v) for v in s.tolist()],
        "loss": loss,
        "grad": [[float(v) for v in row] for row in grad.tolist()],
        "clipped": clipped,
        "clip_fraction": sum(clipped) / len(clipped),
        "token_grad_spread_resp1": abs(float(grad[0, 0]) - float(grad[0, 1])),
        "loss_with_empty": loss4,
        "grad_with_empty": [[float(v) for v in row] for row in grad4.tolist()],
        "token_ppo_grad": [[float(v) for v in row] for row in _token_ppo_grad(logp, old, adv, mask).tolist()],
        "sweep": sweep,
    }
    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("gspo_impl", Path(path).resolve())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines sequence_ratio and gspo_loss)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    args = ap.parse_args()
    m = run(_load(args.impl), args.out)
    print(json.dumps({k: v for k, v in m.items() if k != "sweep"}, indent=1))
