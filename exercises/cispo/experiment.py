"""T3 toy for CISPO: an asynchronous sampler that lags the trainer by k steps.

A token-level bandit: L positions, V actions per position, a tabular softmax policy
(logits z[L, V], float64). Every training step:

  1. the SAMPLER, holding the trainer's weights from k steps ago, samples B responses
     (response i has n_i valid tokens) and reports rollout_logp = log pi_{t-k}(a);
  2. the TRAINER recomputes old_logp = log pi_t(a) fresh (experience prep), then takes exactly
     ONE gradient step (fully-async training: one minibatch, one epoch), so logp == old_logp at
     loss time;
  3. reward R_i = mean over response i's tokens of REWARD[a]; A_i = R_i - mean_j R_j.

Each staleness k in STALENESS and each anchor ("old", "rollout") trains its own policy. All
staleness lanes of one anchor share one call to `cispo_loss` (lanes are stacked along B with
the same mask, so the token-mean gives every lane the same 1/N; the loss is multiplied by the
number of lanes to restore each lane's own token-mean gradient). All lanes see the same random
numbers (common random numbers), so the k = 0 lanes of both anchors are identical.

What a correct CISPO shows (SkyRL PR #1859):
  * anchor "old": r = pi_theta / pi_old == 1 exactly at every step, clip fraction 0, the clamp
    is inert and the loss equals the plain REINFORCE loss -sum A * logp / N;
  * anchor "rollout": r = pi_theta / pi_rollout deviates from 1 as soon as k > 0, the clip
    fraction rises with k, and the weights always stay inside [1 - eps_low, 1 + eps_high].

Standalone:  python exercises/cispo/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path

import torch

from judge.svgplot import save_figures
from judge.testing import batch  # independent calls: one round trip to the sandbox

STALENESS = [0, 1, 2, 4, 8]
ANCHORS = ["old", "rollout"]
V, L, B = 6, 6, 16                            # actions, positions, responses per lane per step
STEPS, LR = 30, 20.0
EPS_LOW, EPS_HIGH = 0.2, 0.28                 # band [0.8, 1.28]
REWARD = [1.0, 0.6, 0.2, 0.0, 0.0, 0.0]       # per-token reward of each action
DTYPE = torch.float64


def _sample(z_lanes: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling. z_lanes [K, L, V], u [B, L] shared by all lanes -> actions [K, B, L]."""
    cdf = torch.softmax(z_lanes, dim=-1).cumsum(-1)                  # [K, L, V]
    a = (u[None, :, :, None] > cdf[:, None, :, :]).sum(-1)           # [K, B, L]
    return a.clamp(max=V - 1)


def _gather_logp(z_lanes: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a) for every lane: z_lanes [K, L, V], actions [K, B, L] -> [K, B, L]."""
    logpi = torch.log_softmax(z_lanes, dim=-1)                       # [K, L, V]
    logpi = logpi[:, None].expand(-1, actions.shape[1], -1, -1)      # [K, B, L, V]
    return logpi.gather(-1, actions[..., None]).squeeze(-1)


def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Train every (anchor, staleness) lane through impl; draw the plots when out_dir is given."""
    g = torch.Generator().manual_seed(seed)
    K = len(STALENESS)
    reward = torch.tensor(REWARD, dtype=DTYPE)
    z0 = 0.5 * torch.randn(L, V, generator=g, dtype=DTYPE)
    z0[:, 0] -= 1.0                                                  # the best action starts unlikely
    lo, hi = 1.0 - EPS_LOW, 1.0 + EPS_HIGH

    state = {}
    for anchor in ANCHORS:
        z = z0.expand(K, L, V).clone()
        state[anchor] = dict(z=z, history=[z.clone()], clip=[[] for _ in range(K)],
                             wmin=[math.inf] * K, wmax=[-math.inf] * K, ratio_dev=[0.0] * K,
                             rmin=[math.inf] * K, rmax=[-math.inf] * K,
                             loss_vs_reinforce=0.0, ratio_trace=[[] for _ in range(K)])

    for step in range(STEPS):
        u = torch.rand(B, L, generator=g, dtype=DTYPE)               # common random numbers
        lengths = torch.randint(1, L + 1, (B,), generator=g)
        mask1 = torch.arange(L)[None, :] < lengths[:, None]          # [B, L]
        mask = mask1.repeat(K, 1)                                    # [K*B, L]
        # The two anchors' lanes are independent and the weights do not need the loss: one batch
        # of 4 calls per step (one round trip under the judge). Step t + 1 needs step t's update.
        queued = {}
        with batch(impl) as b:
            for anchor in ANCHORS:
                st = state[anchor]
                z_now = st["z"]
                # the sampler holds the weights of k steps ago
                z_sampler = torch.stack([st["history"][max(0, step - k)][j]
                                         for j, k in enumerate(STALENESS)])
                actions = _sample(z_sampler, u)                      # [K, B, L]
                rollout_logp = _gather_logp(z_sampler, actions).reshape(K * B, L)
                old_logp = _gather_logp(z_now, actions).reshape(K * B, L)  # fresh recompute, detached
                r_tok = reward[actions]                              # [K, B, L]
                m3 = mask1[None].expand(K, B, L)
                R = (r_tok * m3).sum(-1) / m3.sum(-1)                # [K, B]
                adv = (R - R.mean(dim=1, keepdim=True)).reshape(K * B)

                z_leaf = z_now.clone().requires_grad_(True)
                logp = _gather_logp(z_leaf, actions).reshape(K * B, L)
                loss = b.cispo_loss(logp, old_logp, adv, mask, rollout_logp=rollout_logp,
                                    anchor=anchor, eps_low=EPS_LOW, eps_high=EPS_HIGH)
                with torch.no_grad():
                    anchor_logp = old_logp if anchor == "old" else rollout_logp
                    w = b.cispo_weights(logp.detach(), anchor_logp, mask, eps_low=EPS_LOW,
                                        eps_high=EPS_HIGH)
                queued[anchor] = (z_now, z_leaf, logp, anchor_logp, adv, loss, w)
        for anchor in ANCHORS:
            st = state[anchor]
            z_now, z_leaf, logp, anchor_logp, adv, loss, w = queued[anchor]
            loss = loss.value
            (loss * K).backward()
            with torch.no_grad():
                w = w.value
                ratio = torch.exp(logp.detach() - anchor_logp)
                reinforce = -(adv[:, None] * logp.detach() * mask).sum() / mask.sum()
                st["loss_vs_reinforce"] = max(st["loss_vs_reinforce"],
                                              abs(float(loss.detach()) - float(reinforce)))
                for j in range(K):
                    rows = slice(j * B, (j + 1) * B)
                    wj, rj = w[rows][mask1], ratio[rows][mask1]
                    clipped = (wj - rj).abs() > 1e-9 * (1.0 + rj)
                    st["clip"][j].append(float(clipped.double().mean()))
                    st["wmin"][j] = min(st["wmin"][j], float(wj.min()))
                    st["wmax"][j] = max(st["wmax"][j], float(wj.max()))
                    st["ratio_dev"][j] = max(st["ratio_dev"][j], float((rj - 1).abs().max()))
                    st["rmin"][j] = min(st["rmin"][j], float(rj.min()))
                    st["rmax"][j] = max(st["rmax"][j], float(rj.max()))
                    st["ratio_trace"][j].append(float(rj.max()))
                st["z"] = z_now - LR * z_leaf.grad
                st["history"].append(st["z"].clone())

    metrics = {"staleness": list(STALENESS), "steps": STEPS, "eps_low": EPS_LOW,
               "eps_high": EPS_HIGH, "band": [lo, hi]}
    for anchor in ANCHORS:
        st = state[anchor]
        p_best = torch.softmax(st["z"], dim=-1)[..., 0].mean(-1)    # [K]
        metrics[anchor] = {
            "clip_frac": [sum(c) / len(c) for c in st["clip"]],
            "weight_min": st["wmin"],
            "weight_max": st["wmax"],
            "ratio_min": st["rmin"],
            "ratio_max": st["rmax"],
            "max_abs_ratio_minus_1": st["ratio_dev"],
            "max_abs_loss_minus_reinforce": st["loss_vs_reinforce"],
            "final_p_best": [float(p) for p in p_best],
        }

    # what rollout_ratio_trace.svg draws: the max ratio pi_theta / pi_rollout per step and lane
    metrics["rollout_ratio_trace"] = state["rollout"]["ratio_trace"]

    if out_dir is not None:
        plot(metrics, out_dir)
    return metrics


# The plots are SVG written by judge.svgplot (matplotlib's calls, without its cost: ~1 ms, not tens).
# save_figures draws each figure and, when odd metrics (a wrong solution's) break one, saves instead
# a figure saying what could not be drawn. Same metrics, same bytes.
def plot(metrics: dict, out_dir) -> list[str]:
    """Draw the SVG plots and write metrics.json into out_dir from the metrics alone; returns the names."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    figures = [("clip_fraction_and_weights.svg", (8, 3.2), _draw_clip_and_weights),
               ("rollout_ratio_trace.svg", (5, 3.2), _draw_ratio_trace)]
    return ["metrics.json"] + save_figures(out, metrics, figures)


def _draw_clip_and_weights(fig, metrics: dict) -> None:
    ks = metrics["staleness"]
    lo, hi = 1.0 - EPS_LOW, 1.0 + EPS_HIGH
    ax = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.15, top=0.9, wspace=0.22)
    for anchor, mk in (("old", "o-"), ("rollout", "s-")):
        ax[0].plot(ks, metrics[anchor]["clip_frac"], mk, label=f'anchor "{anchor}"')
    ax[0].set_xlabel("sampler staleness k (steps)")
    ax[0].set_ylabel("clip fraction")
    ax[0].set_title("tokens whose weight was clamped")
    ax[0].legend()
    for anchor, mk, c, dx in (("old", "o", "C0", -0.12), ("rollout", "s", "C1", 0.12)):
        m = metrics[anchor]
        x = [k + dx for k in ks]
        ax[1].vlines(x, m["ratio_min"], m["ratio_max"], colors=c, alpha=0.25, lw=6,
                     label=f'raw ratio, "{anchor}"')
        ax[1].vlines(x, m["weight_min"], m["weight_max"], colors=c, lw=1.5)
        ax[1].plot(x, m["weight_min"], mk, x, m["weight_max"], mk, c=c)
    ax[1].axhline(lo, ls="--", c="gray")
    ax[1].axhline(hi, ls="--", c="gray")
    ax[1].set_xlabel("sampler staleness k (steps)")
    ax[1].set_title("weights (markers) vs raw ratios (bars)")
    ax[1].legend(fontsize=7)
    for a in ax:
        a.locator_params(nbins=5)


def _draw_ratio_trace(fig, metrics: dict) -> None:
    ax = fig.subplots()
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.15, top=0.95)
    for k, trace in zip(metrics["staleness"], metrics["rollout_ratio_trace"]):
        ax.plot(trace, label=f"k={k}")
    ax.axhline(1.0 + EPS_HIGH, ls="--", c="gray")
    ax.set_xlabel("training step")
    ax.set_ylabel("max ratio pi_theta / pi_rollout")
    ax.locator_params(nbins=5)
    if metrics["rollout_ratio_trace"]:
        ax.legend(fontsize=7)


def _load(path: str):
    spec = importlib.util.spec_from_file_location("cispo_impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", required=True, help="your solution file (cispo_weights, cispo_loss)")
    ap.add_argument("--out", default=None, help="folder for plots and metrics.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(run(_load(args.impl), args.out, args.seed), indent=2))
