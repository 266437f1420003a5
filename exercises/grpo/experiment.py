"""T3 toy for GRPO: a deterministic 4-arm bandit trained with your two functions.

One prompt, four possible one-token answers ("arms") with rewards [0, 0.2, 1, 0]. Each
iteration samples a group of G = 8 answers from the current softmax policy (inverse-CDF
sampling with uniforms drawn up front from a seeded generator, so the run is deterministic),
computes `group_advantages`, freezes `old_logp`, then takes 4 PPO epochs of plain SGD on the
four logits, each epoch calling `grpo_loss` and back-propagating through it. Two policies
train side by side in the same batch: one with std-normalised advantages, one with
normalize_std=False.

What to look for:
  * epoch 1 of every iteration is exactly on-policy (r = 1): its clip fraction is exactly 0;
  * later epochs move the policy away from old_logp and some ratios leave the clip range;
  * P(arm 2) passes 0.9 within about 30 iterations;
  * the no-std variant (normalize_std=False, Dr. GRPO style) learns too, more slowly here.

Usage:  python exercises/grpo/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch

from judge.svgplot import save_figures
from judge.testing import batch  # independent calls: one round trip to the sandbox

ARM_REWARDS = [0.0, 0.2, 1.0, 0.0]
BEST_ARM = 2
GROUP_SIZE = 8
EPOCHS = 4
ITERATIONS = 30
LR = 0.2
CLIP_LOW = 0.2
CLIP_HIGH = 0.28


VARIANTS = (True, False)   # normalize_std of policy 0 (GRPO) and policy 1 (no std, Dr. GRPO)


def _train(impl, seed: int) -> list[dict]:
    """Train one policy per variant; return per-iteration probabilities and clip fractions.

    Both policies see the same uniforms (so the same draws while their probabilities agree) and
    train side by side: each iteration stacks their groups into one batch of 2 x 8 one-token
    responses, so one `grpo_loss` call per epoch serves both. The loss averages over all 16
    responses (seq-mean), so each policy's gradient is 1/2 of what its own batch of 8 would
    give; it is multiplied back by the number of policies (an exact power of two).
    """
    n_pol, G, n_arms = len(VARIANTS), GROUP_SIZE, len(ARM_REWARDS)
    g = torch.Generator()
    g.manual_seed(seed)
    uniforms = torch.rand(ITERATIONS, G, generator=g, dtype=torch.float64)
    arm_rewards = torch.tensor(ARM_REWARDS, dtype=torch.float64)
    theta = torch.zeros(n_pol, n_arms, dtype=torch.float64)      # logits, one row per policy
    rows = torch.arange(n_pol).repeat_interleave(G)               # [2G] policy of each response
    mask = torch.ones(n_pol * G, 1, dtype=torch.bool)            # one token per response

    hist = [{"p_best": [float(torch.softmax(theta[k], -1)[BEST_ARM])], "mean_reward": [],
             "clip_frac": [], "zero_grad_epochs": 0} for k in range(n_pol)]
    for it in range(ITERATIONS):
        cdf = torch.cumsum(torch.softmax(theta, -1), -1)           # [2, 4]
        arms = torch.searchsorted(cdf, uniforms[it].expand(n_pol, G).contiguous(), right=True)
        arms = arms.clamp(max=n_arms - 1)                          # [2, G]
        rewards = arm_rewards[arms]                                # [2, G]
        with batch(impl) as b:                                     # both variants in one round trip
            advs = [b.group_advantages(rewards[k].clone(), G, normalize_std=VARIANTS[k])
                    for k in range(n_pol)]
        flat_arms = arms.reshape(-1)                               # [2G]
        old_logp = torch.log_softmax(theta, -1)[rows, flat_arms].detach()   # [2G]
        adv = torch.cat([a.value.detach().to(torch.float64) for a in advs])   # [2G]

        fracs = [[] for _ in range(n_pol)]
        for _ in range(EPOCHS):
            th = theta.clone().requires_grad_(True)
            logp = torch.log_softmax(th, -1)[rows, flat_arms]      # [2G], differentiable in th
            ratio = torch.exp(logp.detach() - old_logp)
            clipped = ((adv > 0) & (ratio > 1 + CLIP_HIGH)) | ((adv < 0) & (ratio < 1 - CLIP_LOW))
            for k in range(n_pol):
                fracs[k].append(float(clipped[k * G:(k + 1) * G].double().mean()))
            # Hand the submission a leaf [2G, 1]; chain its gradient back to the logits here.
            logp_leaf = logp.detach().unsqueeze(-1).clone().requires_grad_(True)
            loss = impl.grpo_loss(logp_leaf, old_logp.unsqueeze(-1), adv, mask,
                                  clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
            loss.backward()
            g_logp = logp_leaf.grad
            if g_logp is None:
                g_logp = torch.zeros_like(logp_leaf)
            g_logp = g_logp.detach().to(torch.float64).reshape(n_pol * G) * n_pol
            if not bool(torch.isfinite(g_logp).all()):
                raise RuntimeError("grpo_loss produced a non-finite gradient in the bandit")
            for k in range(n_pol):
                if bool((g_logp[k * G:(k + 1) * G] == 0).all()):
                    hist[k]["zero_grad_epochs"] += 1
            (g_theta,) = torch.autograd.grad(logp, th, grad_outputs=g_logp)
            theta = (theta - LR * g_theta).detach()
        for k in range(n_pol):
            hist[k]["clip_frac"].append(fracs[k])
            hist[k]["mean_reward"].append(float(rewards[k].mean()))
            hist[k]["p_best"].append(float(torch.softmax(theta[k], -1)[BEST_ARM]))

    for k in range(n_pol):
        h = hist[k]
        hit = [i for i, p in enumerate(h["p_best"]) if p > 0.9]
        h["final_p_best"] = h["p_best"][-1]
        h["iterations_to_0_9"] = hit[0] if hit else -1
        h["final_probs"] = [float(p) for p in torch.softmax(theta[k], -1)]
    return hist


def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Train with std normalisation and without; return JSON-serialisable metrics (and draw
    the plots when out_dir is given)."""
    std, nostd = _train(impl, seed)
    later = [f for row in std["clip_frac"] for f in row[1:]]
    metrics = {
        "arm_rewards": ARM_REWARDS, "group_size": GROUP_SIZE, "epochs": EPOCHS,
        "iterations": ITERATIONS, "lr": LR, "clip_low": CLIP_LOW, "clip_high": CLIP_HIGH,
        "p_best": std["p_best"],
        "mean_reward": std["mean_reward"],
        "clip_frac": std["clip_frac"],
        "final_p_best": std["final_p_best"],
        "final_probs": std["final_probs"],
        "iterations_to_0_9": std["iterations_to_0_9"],
        "clip_frac_epoch1_max": max(row[0] for row in std["clip_frac"]),
        "clip_frac_later_max": max(later),
        "clip_frac_later_mean": sum(later) / len(later),
        "zero_grad_epochs": std["zero_grad_epochs"],
        "nostd_p_best": nostd["p_best"],
        "nostd_clip_frac_epoch1_max": max(row[0] for row in nostd["clip_frac"]),
        "nostd_final_p_best": nostd["final_p_best"],
        "nostd_iterations_to_0_9": nostd["iterations_to_0_9"],
        "nostd_zero_grad_epochs": nostd["zero_grad_epochs"],
    }
    if out_dir is not None:
        plot(metrics, out_dir)
    return metrics


# The plots are SVG written by judge.svgplot (matplotlib's calls, without its cost: ~1 ms, not tens).
# save_figures draws each figure and, when odd metrics (a wrong solution's) break one, saves instead
# a figure saying what could not be drawn. Same metrics, same bytes.
def plot(metrics: dict, out_dir) -> list[str]:
    """Draw bandit.svg and write metrics.json from the metrics alone; returns the names written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    figures = [("bandit.svg", (8, 3), _draw_bandit)]
    return ["metrics.json"] + save_figures(out, metrics, figures)


def _draw_bandit(fig, m: dict) -> None:
    ax = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.95, wspace=0.25)
    ax[0].plot(m["p_best"], label="GRPO (std-normalised)")
    ax[0].plot(m["nostd_p_best"], label="no std (R - mean)")
    ax[0].axhline(0.9, color="grey", lw=0.5, ls="--")
    ax[0].set_xlabel("iteration")
    ax[0].set_ylabel("P(arm 2)")
    ax[0].set_ylim(0, 1)
    ax[0].legend(fontsize=7)
    cf = m["clip_frac"]
    for e in range(len(cf[0]) if cf else 0):
        ax[1].plot([row[e] if e < len(row) else float("nan") for row in cf], label=f"epoch {e + 1}")
    ax[1].set_xlabel("iteration")
    ax[1].set_ylabel("clip fraction")
    if cf:
        ax[1].legend(fontsize=7)
    for a in ax:
        a.locator_params(nbins=5)


def _load(path: str):
    spec = importlib.util.spec_from_file_location("grpo_impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines both functions)")
    ap.add_argument("--out", default=None, help="folder for bandit.svg and metrics.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    res = run(_load(args.impl), args.out, args.seed)
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, list)}, indent=1))
    print("P(arm 2):", " ".join(f"{p:.3f}" for p in res["p_best"]))
    print("no-std  :", " ".join(f"{p:.3f}" for p in res["nostd_p_best"]))
