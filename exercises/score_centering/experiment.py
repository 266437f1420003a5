"""T3 toy: a sampler that drags the policy with no reward signal, and score centering stopping it.

One prefix, a vocabulary of V = 6 tokens. The trainer starts at p0 = softmax(z0); the sampler is
a FIXED, different distribution q (think: a stale or numerically different inference engine).
Every advantage is the same constant A = 1, so there is no reward signal at all. We take the
EXACT expectation of the loss over a ~ q (no sampling noise) and do 50 steps of gradient descent
on the logits with lr = 1:

  * without centring (plain REINFORCE, computed here): grad = -(q - p), the logits drift and p
    walks to q: KL(q || p) collapses although nothing was learned;
  * with sc_policy_loss and the head H = the whole vocabulary: grad = 0, the logits do not move;
  * with the sampler's top-k head (k = 4, k = 2): the tail is reconstructed as alpha * p, so the
    drift shrinks to q_hat - q but does not vanish.

The expectation under q is a token-mean: one row per token a with advantage V * q_a * A.

The four runs go side by side, one step at a time: a step's sc_policy_loss calls for the three
heads are independent, so they go to impl in one batch (one round trip under the judge), and the
plain REINFORCE step, which needs no call, is taken while they are computed. Each run keeps its
logits z_t; the drift and KL curves are computed from them once, after the last step.

    python exercises/score_centering/experiment.py --impl my_solution.py --out figs/
"""

import argparse
import importlib.util

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

D = torch.float64
Z0 = [1.0, 0.5, 0.0, -0.5, -1.0, -2.0]          # trainer logits at step 0
DQ = [0.0, 0.3, -0.2, 0.0, -1.0, -1.5]          # sampler logits = Z0 + DQ
STEPS = 50
LR = 1.0
HEADS = (6, 4, 2)                               # sampler top-k head sizes (6 = whole vocabulary)
TOKENS = torch.arange(len(Z0))                  # [V]: the token of each row of an SC call


def _queue_sc(b, z, log_q, ids, rollout, adv):
    """One step's sc_policy_loss for the head ``ids`` [k], queued in the batch ``b``: the pending loss.

    ``z`` [V] (a fresh tensor) becomes the leaf that the loss's gradient lands on. ``rollout`` [V, 1]
    and ``adv`` [V] are the same at every step: each call gets its own copy, so a submission that
    writes into its inputs spoils only that call, as with inputs built afresh.
    """
    V, k = log_q.shape[0], ids.shape[0]
    lp = torch.log_softmax(z.requires_grad_(True), -1)             # [V]
    logp = lp[TOKENS].reshape(V, 1)                                # one row per token a
    train_head = lp[ids].expand(V, k).reshape(V, 1, k)             # same prefix in every row
    sampler_head = log_q[ids].expand(V, k).reshape(V, 1, k)
    mask = torch.ones(V, 1, dtype=torch.bool)
    return b.sc_policy_loss(logp, rollout.clone(), train_head, sampler_head, adv.clone(), mask,
                            mode="none")


def _step_sc(z, pending):
    """The logits after one SC step: z [V] is the leaf ``_queue_sc`` made, ``pending`` its loss."""
    check_tensor(pending.value, what="sc_policy_loss", shape=()).backward()
    return z.detach() - LR * z.grad


def _step_plain(z, grad_logp):
    """The logits after one plain REINFORCE step on E_{a~q}[-A log p_a] = -(q A log_softmax(z)).sum().

    ``grad_logp`` [V] = -q A is that loss's gradient with respect to log p, the same at every step;
    the log-softmax backward kernel turns it into d loss / dz = grad_logp - p * sum(grad_logp),
    the very call autograd makes for that loss (the same numbers, without building a graph).
    """
    grad = torch._log_softmax_backward_data(grad_logp, torch.log_softmax(z, -1), -1, z.dtype)
    return z - LR * grad


def _invariants(q, log_q, A):
    """What every step uses: an SC call's rollout log-probs [V, 1] and advantages [V] (the
    token-mean over one row per token a is E_{a~q}), and the plain loss's d/d log p [V]."""
    V = log_q.shape[0]
    return log_q[TOKENS].reshape(V, 1), V * log_q.exp() * A, -(q * A)


def _run(impl, z0, q, log_q, heads, A):
    """The logits z_t, t = 0..STEPS, of the plain run and of the SC run of every head in ``heads``.

    The runs go side by side: a step's calls for the different heads do not depend on each other,
    so they go to impl in one batch (one round trip under the judge), and the plain step is taken
    while impl computes them; each run's steps stay sequential.
    """
    rollout, adv, grad_logp = _invariants(q, log_q, A)
    plain = [z0.clone()]
    sc = [[z0.clone()] for _ in heads]
    for _ in range(STEPS):
        with batch(impl) as b:
            queued = [_queue_sc(b, zs[-1], log_q, ids, rollout, adv) for zs, ids in zip(sc, heads)]
        plain.append(_step_plain(plain[-1], grad_logp))            # while impl computes
        for zs, pending in zip(sc, queued):
            zs.append(_step_sc(zs[-1], pending))
    return [plain] + sc


def _setup():
    """The toy's fixed inputs: z0 [V], log q [V], q [V] and the sampler's top-k heads."""
    z0 = torch.tensor(Z0, dtype=D)
    log_q = torch.log_softmax(z0 + torch.tensor(DQ, dtype=D), -1)
    return z0, log_q, log_q.exp(), [torch.topk(log_q, k).indices for k in HEADS]


def _curves(runs, z0, q):
    """Each run's drift ||z_t - z_0|| and KL(q || p_t) for t = 0..STEPS, as lists of floats."""
    with torch.no_grad():                                           # the SC runs' z_t are leaves
        z = torch.stack([torch.stack(zs) for zs in runs])          # [runs, STEPS + 1, V]
        drift = (z - z0).norm(dim=-1)                              # [runs, STEPS + 1]
        kl = (q * (q.log() - torch.log_softmax(z, -1))).sum(-1)    # [runs, STEPS + 1]
    return list(zip(drift.tolist(), kl.tolist()))


def run(impl, out_dir=None, seed=0, runs=None):
    """Run the drift toy through `impl.sc_policy_loss`; return the metrics (seed is unused: exact)
    and write metrics.json and the views (views/*.vl.json) when out_dir is given. ``runs``: what
    makes the runs (default ``_run``; the judge's T3 passes a faster one with the same result, see tests/_guide.py)."""
    z0, log_q, q, heads = _setup()
    A = 1.0
    names = ["none"] + [f"sc_k{k}" for k in HEADS]
    runs = (runs or _run)(impl, z0, q, log_q, heads, A)
    curves = dict(zip(names, _curves(runs, z0, q)))
    metrics = {
        "p0": torch.softmax(z0, -1).tolist(),
        "q": q.tolist(),
        "steps": STEPS,
        "lr": LR,
    }
    for name, (drift, kl) in curves.items():
        metrics[f"{name}_drift"] = drift[-1]
        metrics[f"{name}_kl_start"] = kl[0]
        metrics[f"{name}_kl_end"] = kl[-1]
        metrics[f"{name}_drift_curve"] = drift
        metrics[f"{name}_kl_curve"] = kl
    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path):
    spec = importlib.util.spec_from_file_location("impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines sc_policy_loss)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    args = ap.parse_args()
    m = run(_load(args.impl), args.out)
    for name in ("none", "sc_k6", "sc_k4", "sc_k2"):
        print(f"{name:6s}  ||dz|| = {m[name + '_drift']:.6f}   KL(q||p): {m[name + '_kl_start']:.5f} -> "
              f"{m[name + '_kl_end']:.5f}")
