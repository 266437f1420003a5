"""T3 toy for r3: how much does one MoE layer's output move when the sampler's router is noisy?

A rollout engine ("sampler") and a trainer hold the same MoE layer, but the sampler's router
logits carry a little numerical noise: u_q = u + sigma * eps. The sampler routes each token to
I_q = TopK(u_q) and records it. The trainer then either

  * recomputes its own route, I = TopK(u), and outputs F_I(x; u)    ("recompute"), or
  * replays the recorded route and outputs F_{I_q}(x; u)            ("replay", R3).

Per token we measure ||y_trainer - y_sampler||_2. A tiny sigma flips the top-k set of the few
tokens whose k-th and (k+1)-th logits nearly tie; recompute then swaps a whole expert (an O(1)
jump), while replay only sees the O(sigma) change of the gates on the same experts.

Every MoE forward goes through ``impl.moe_replay_forward`` (the standard MoE forward is the replay
of the trainer's own top-k). Run standalone:

    python exercises/r3/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

N, D, E, K = 512, 8, 8, 2
SIGMAS = [0.0, 0.0025, 0.005, 0.01, 0.02, 0.05]


def _toy(seed: int):
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    x = torch.randn(N, D, generator=g, dtype=f64)
    w_router = torch.randn(D, E, generator=g, dtype=f64) / math.sqrt(D)
    w_expert = torch.randn(E, D, D, generator=g, dtype=f64) / math.sqrt(D)
    eps = torch.randn(N, E, generator=g, dtype=f64)  # one noise draw, scaled by each sigma
    probe = torch.randn(N, D, generator=g, dtype=f64)  # a fixed direction for the gradient check
    return x, x @ w_router, w_expert, eps, probe


def _output(pending, x: torch.Tensor) -> torch.Tensor:
    """A pending moe_replay_forward's output, [N, D] like x (shape checked before any use)."""
    return check_tensor(pending.value, what="moe_replay_forward", shape=tuple(x.shape))


def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Run the noisy-sampler toy through impl; writes metrics.json and the views when out_dir is given."""
    x, u, w_expert, eps, probe = _toy(seed)
    idx_train = torch.topk(u, K, dim=-1).indices  # the trainer's own route
    sampled = []
    for sigma in SIGMAS:
        u_q = u + sigma * eps
        sampled.append((u_q, torch.topk(u_q, K, dim=-1).indices))  # idx_q: recorded by the sampler
    idx_grad = torch.topk(u + SIGMAS[-1] * eps, K, dim=-1).indices
    u_leaf = u.detach().clone().requires_grad_(True)
    # No forward of the toy depends on another's output: they all go to impl in one batch (one
    # round trip under the judge), and are read below in the order they were made.
    with batch(impl) as b:
        recompute = b.moe_replay_forward(x, u, idx_train, w_expert, score_function="softmax")
        sweep = [(b.moe_replay_forward(x, u_q, idx_q, w_expert, score_function="softmax"),
                  b.moe_replay_forward(x, u, idx_q, w_expert, score_function="softmax")) for u_q, idx_q in sampled]
        routed = b.moe_replay_forward(x, u_leaf, idx_grad, w_expert, score_function="softmax")
    y_recompute = _output(recompute, x)
    set_train = idx_train.sort(dim=-1).values

    m = {"N": N, "D": D, "E": E, "k": K, "seed": seed, "sigmas": list(SIGMAS),
         "flip_frac": [], "recompute_err_mean": [], "recompute_err_max": [],
         "replay_err_mean": [], "replay_err_max": [], "replay_err_flipped_max": [],
         "same_route_max_diff": 0.0}
    per_token = {}
    for sigma, (_, idx_q), (sampler, replay) in zip(SIGMAS, sampled, sweep):
        y_sampler, y_replay = _output(sampler, x), _output(replay, x)
        flipped = (idx_q.sort(dim=-1).values != set_train).any(dim=-1)
        err_rec = (y_recompute - y_sampler).detach().norm(dim=-1)
        err_rep = (y_replay - y_sampler).detach().norm(dim=-1)
        same = ~flipped  # same expert set, maybe a different column order: outputs must agree
        if bool(same.any()):
            diff = float((y_recompute - y_replay).detach()[same].abs().max())
            m["same_route_max_diff"] = max(m["same_route_max_diff"], diff)
        m["flip_frac"].append(float(flipped.double().mean()))
        m["recompute_err_mean"].append(float(err_rec.mean()))
        m["recompute_err_max"].append(float(err_rec.max()))
        m["replay_err_mean"].append(float(err_rep.mean()))
        m["replay_err_max"].append(float(err_rep.max()))
        m["replay_err_flipped_max"].append(float(err_rep[flipped].max()) if bool(flipped.any()) else 0.0)
        per_token[sigma] = (err_rec, err_rep, flipped)

    # Replay still trains the router: the gradient reaches the selected logits and only those.
    y = _output(routed, x)
    if y.requires_grad:
        (y * probe).sum().backward()
    grad = u_leaf.grad if u_leaf.grad is not None else torch.zeros_like(u)
    selected = torch.zeros(N, E, dtype=torch.bool).scatter_(1, idx_grad, True)
    m["router_grad_selected_norm"] = float(grad[selected].norm())
    m["router_grad_unselected_max"] = float(grad[~selected].abs().max())

    # what the middle panel of views/r3_toy.vl.json draws: log10 per-token errors at the largest sigma
    m["error_hist"] = _error_hist(*per_token[SIGMAS[-1]])

    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, m, out_dir)
    return m


def _error_hist(err_rec: torch.Tensor, err_rep: torch.Tensor, flipped: torch.Tensor, bins: int = 30) -> dict:
    """Counts of log10(max(error, 1e-6)) for recompute and replay over shared bins (non-finite dropped)."""
    logs = [e.clamp_min(1e-6).log10() for e in (err_rec, err_rep)]
    logs = [v[torch.isfinite(v)] for v in logs]
    both = torch.cat(logs)
    lo, hi = (float(both.min()), float(both.max())) if both.numel() else (-6.0, 0.0)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
    counts = [torch.histc(v, bins=bins, min=lo, max=hi).long().tolist() for v in logs]
    return {"sigma": SIGMAS[-1], "edges": edges.tolist(), "recompute": counts[0], "replay": counts[1],
            "flipped": int(flipped.sum())}


def _load(path: str):
    p = Path(path).resolve()
    spec = importlib.util.spec_from_file_location("r3_impl", p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["r3_impl"] = mod
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", required=True, help="your solution file (defines moe_replay_forward)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    metrics = run(_load(args.impl), args.out, seed=args.seed)
    for i, sg in enumerate(metrics["sigmas"]):
        print(f"sigma={sg:<7g} flips={100 * metrics['flip_frac'][i]:5.2f}%  "
              f"recompute mean/max={metrics['recompute_err_mean'][i]:.4f}/{metrics['recompute_err_max'][i]:.3f}  "
              f"replay mean/max={metrics['replay_err_mean'][i]:.4f}/{metrics['replay_err_max'][i]:.4f}")
    print(f"router gradient: selected norm {metrics['router_grad_selected_norm']:.4f}, "
          f"unselected max {metrics['router_grad_unselected_max']:.3g}")
