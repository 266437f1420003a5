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

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

ARM_REWARDS = [0.0, 0.2, 1.0, 0.0]
BEST_ARM = 2
GROUP_SIZE = 8
EPOCHS = 4
ITERATIONS = 30
LR = 0.2
CLIP_LOW = 0.2
CLIP_HIGH = 0.28


VARIANTS = (True, False)   # normalize_std of policy 0 (GRPO) and policy 1 (no std, Dr. GRPO)
_ARM_REWARDS = torch.tensor(ARM_REWARDS, dtype=torch.float64)


def _clip_fractions(adv_pos, adv_neg, ratio, n_pol: int, G: int):
    """[n_pol] float64: per policy, the fraction of its responses clipped on the side that counts
    (r > 1 + clip_high where A > 0, r < 1 - clip_low where A < 0). adv_pos, adv_neg, ratio: [2G]
    (or [K, 2G], K epochs at once: [K, n_pol])."""
    clipped = (adv_pos & (ratio > 1 + CLIP_HIGH)) | (adv_neg & (ratio < 1 - CLIP_LOW))   # [2G]
    if clipped.shape == ratio.shape:
        return clipped.view(*ratio.shape[:-1], n_pol, G).double().mean(-1)
    # advantages of another shape (a wrong group_advantages) broadcast: each policy's block of rows
    return torch.stack([clipped[k * G:(k + 1) * G].double().mean() for k in range(n_pol)])


def _train(impl, seed: int, trace: list | None = None) -> list[dict]:
    """Train one policy per variant; return per-iteration probabilities and clip fractions.

    Both policies see the same uniforms (so the same draws while their probabilities agree) and
    train side by side: each iteration stacks their groups into one batch of 2 x 8 one-token
    responses, so one `grpo_loss` call per epoch serves both. The loss averages over all 16
    responses (seq-mean), so each policy's gradient is 1/2 of what its own batch of 8 would
    give; it is multiplied back by the number of policies (an exact power of two).

    Each call goes out as soon as its inputs exist, and the bookkeeping that does not need its
    answer (the advantages' old_logp; an epoch's clip fractions) runs while the submission
    computes. The curves are kept as tensors, one per iteration or epoch, and turned into Python
    numbers once at the end. The chain rule from logp back to the logits runs the two kernels
    autograd would (index_put with accumulate, log_softmax's backward) without building a graph.
    ``trace``: receives the logits [2, 4] before every epoch, then the final ones.
    """
    n_pol, G, n_arms = len(VARIANTS), GROUP_SIZE, len(ARM_REWARDS)
    uniforms, rows, mask = _setup(seed)
    theta = torch.zeros(n_pol, n_arms, dtype=torch.float64)      # logits, one row per policy
    lsm = torch.log_softmax(theta, -1)                            # [2, 4] log pi(arm), kept with theta

    probs_seen, rewards_seen = [], []   # per iteration: [2, 4] pi before it, [2, G] rewards
    clip_seen, grads_seen = [], []      # per epoch: [2] clip fractions, [2G] d loss / d logp
    for it in range(ITERATIONS):
        probs = torch.softmax(theta, -1)                           # [2, 4]
        with batch(impl) as b:                                     # both variants in one round trip
            arms, rewards, advs = _draw_group(b, probs, uniforms[it])
        # while the submission computes the advantages
        probs_seen.append(probs)
        rewards_seen.append(rewards)
        flat_arms = arms.reshape(-1)                               # [2G]
        old_logp = lsm[rows, flat_arms]                            # [2G], frozen for the 4 epochs
        logp = lsm[rows, flat_arms]                                # [2G], epoch 1's (a separate tensor)
        adv = torch.cat([_advantages(a) for a in advs])               # [2G]
        # The advantages' signs, for the clip bookkeeping: taken again before a call only if the
        # submission wrote into adv since (an in-place write bumps its version counter).
        adv_pos, adv_neg, adv_version = adv > 0, adv < 0, adv._version

        for epoch in range(EPOCHS):
            # What the clip bookkeeping reads of the call's arguments is read before the call.
            ratio = torch.exp(logp - old_logp)                     # [2G]
            if adv._version != adv_version:
                adv_pos, adv_neg, adv_version = adv > 0, adv < 0, adv._version
            # Advantages of another shape than [2G] (a wrong group_advantages) broadcast in the
            # bookkeeping or make it raise: then it runs before the call, where it always ran.
            early = adv.shape != ratio.shape
            if early:
                clip_seen.append(_clip_fractions(adv_pos, adv_neg, ratio, n_pol, G))
            if trace is not None:
                trace.append(theta)
            # Hand the submission a leaf [2G, 1]; chain its gradient back to the logits here.
            logp_leaf = logp.unsqueeze(-1).clone().requires_grad_(True)
            with batch(impl) as b:
                pending = b.grpo_loss(logp_leaf, old_logp.unsqueeze(-1), adv, mask,
                                      clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
            if not early:                                          # while the submission computes
                clip_seen.append(_clip_fractions(adv_pos, adv_neg, ratio, n_pol, G))
            g_logp = _logp_grad(pending, logp_leaf)
            if g_logp is None:
                raise RuntimeError("grpo_loss produced a non-finite gradient in the bandit")
            grads_seen.append(g_logp)
            theta = _sgd_step(theta, lsm, (rows, flat_arms), g_logp)
            lsm = torch.log_softmax(theta, -1)
            logp = lsm[rows, flat_arms]                            # [2G], the next epoch's

    if trace is not None:
        trace.append(theta)
    probs_seen.append(torch.softmax(theta, -1))
    return _history(probs_seen, rewards_seen, clip_seen, grads_seen)


def _setup(seed: int):
    """A run's fixed inputs: the uniforms [T, 2, G] (the same for both policies), the policy of
    each response [2G] and the mask [2G, 1] (one token per response)."""
    n_pol, G = len(VARIANTS), GROUP_SIZE
    g = torch.Generator()
    g.manual_seed(seed)
    uniforms = torch.rand(ITERATIONS, G, generator=g, dtype=torch.float64)
    uniforms = uniforms.unsqueeze(1).expand(ITERATIONS, n_pol, G).contiguous()  # [T, 2, G]
    rows = torch.arange(n_pol).repeat_interleave(G)               # [2G] policy of each response
    return uniforms, rows, torch.ones(n_pol * G, 1, dtype=torch.bool)


def _draw_group(b, probs, uniforms):
    """One iteration's groups: arms [2, G] drawn from probs [2, 4] by inverse CDF with uniforms
    [2, G], their rewards [2, G], and each variant's group_advantages call queued in ``b``."""
    arms = torch.searchsorted(torch.cumsum(probs, -1), uniforms, right=True)
    arms = arms.clamp(max=len(ARM_REWARDS) - 1)                    # [2, G]
    rewards = _ARM_REWARDS[arms]                                   # [2, G]
    advs = [b.group_advantages(rewards[k].clone(), GROUP_SIZE, normalize_std=VARIANTS[k])
            for k in range(len(VARIANTS))]
    return arms, rewards, advs


def _advantages(pending) -> torch.Tensor:
    """One variant's advantages [G] float64, from a pending group_advantages (its shape checked
    before anything is made of it)."""
    return check_tensor(pending.value, what="group_advantages", shape=(GROUP_SIZE,)).detach().to(torch.float64)


def _logp_grad(pending, logp_leaf):
    """d loss / d logp [2G] float64 from a pending grpo_loss on the leaf ``logp_leaf`` [2G, 1],
    times the number of policies (the loss averages over both); None if not finite."""
    check_tensor(pending.value, what="grpo_loss", shape=()).backward()
    g_logp = logp_leaf.grad
    if g_logp is None:
        g_logp = torch.zeros_like(logp_leaf)
    g_logp = g_logp.detach().to(torch.float64).reshape(-1) * len(VARIANTS)
    return g_logp if bool(torch.isfinite(g_logp).all()) else None


def _sgd_step(theta, lsm, index, g_logp):
    """theta - LR * d loss / d theta, back to the logits [2, 4] through logp = lsm[index]
    (lsm = log_softmax(theta), index = (rows, arms) [2G] each) from g_logp [2G], with the kernels
    autograd runs for it (the textbook g - softmax * sum(g) differs in the last bits). Also for
    K epochs at once: theta, lsm [K, 2, 4], index (epoch [K, 1], rows [2G], arms [2G] or
    [K, 2G]), g_logp [K, 2G]."""
    g_lsm = torch.zeros_like(theta)
    g_lsm.index_put_(index, g_logp, accumulate=True)                           # [2, 4] / [K, 2, 4]
    return theta - LR * torch._log_softmax_backward_data(g_lsm, lsm, -1, torch.float64)


def _history(probs_seen, rewards_seen, clip_seen, grads_seen) -> list[dict]:
    """Per variant: the curves of a run, from its per-iteration probabilities [2, 4] (and the
    final ones) and rewards [2, G], and its per-epoch clip fractions [2] and gradients [2G]."""
    n_pol, G = len(VARIANTS), GROUP_SIZE
    p_best = torch.stack(probs_seen)[:, :, BEST_ARM].T.tolist()           # [2][T + 1]
    mean_reward = torch.stack(rewards_seen).mean(-1).T.tolist()           # [2][T]
    clip_frac = torch.stack(clip_seen).view(ITERATIONS, EPOCHS, n_pol).permute(2, 0, 1).tolist()
    zero_grad = (torch.stack(grads_seen).view(-1, n_pol, G) == 0).all(-1).sum(0).tolist()  # [2]
    final_probs = probs_seen[-1].tolist()                                 # [2][4]
    hist = []
    for k in range(n_pol):
        hit = [i for i, p in enumerate(p_best[k]) if p > 0.9]
        hist.append({"p_best": p_best[k], "mean_reward": mean_reward[k], "clip_frac": clip_frac[k],
                     "zero_grad_epochs": zero_grad[k], "final_p_best": p_best[k][-1],
                     "iterations_to_0_9": hit[0] if hit else -1, "final_probs": final_probs[k]})
    return hist


def run(impl, out_dir=None, seed: int = 0, train=None) -> dict:
    """Train with std normalisation and without; return JSON-serialisable metrics (and write
    metrics.json and the views when out_dir is given). ``train``: what makes the run (default ``_train``; the
    judge's T3 passes a faster one with the same result, see tests/_guide.py)."""
    std, nostd = (train or _train)(impl, seed)
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
    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("grpo_impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines both functions)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    res = run(_load(args.impl), args.out, args.seed)
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, list)}, indent=1))
    print("P(arm 2):", " ".join(f"{p:.3f}" for p in res["p_best"]))
    print("no-std  :", " ".join(f"{p:.3f}" for p in res["nostd_p_best"]))
