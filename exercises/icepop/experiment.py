"""T3 toy for icepop: the exact bias and variance of behaviour-corrected gradients (no sampling).

One prefix, 6 actions. The trainer's frozen policy is p0 = softmax(z0); the rollout engine
samples from a slightly different q = softmax(z0 + delta). A token a ~ q with advantage
A_a = R_a - E_q[R] gives the per-sample gradient estimate (of the ascent direction)

    g_a = w(rho_a) * f_a,    f_a = A_a * (e_a - p0) = A_a * d log p0(a) / d z,    rho_a = p0(a) / q(a),

and the target is the on-policy expectation E_{p0}[f]. Everything is summed exactly over the six
actions, so the numbers below are exact (up to float64 rounding):

    bias     = E_q[w f] - E_{p0}[f] = E_q[(w - rho) f]        (reported as its Euclidean norm)
    variance = trace Cov_q(w f) = E_q ||w f||^2 - ||E_q[w f]||^2

for four weightings: none (w = 1), TIS clamp(rho, 0, 2), IcePop rho 1[.5 <= rho <= 2], and full
IS (w = rho). "icepop" and "is" go through YOUR icepop_weights and icepop_ppo_loss (bands
[.5, 2] and [0, 1e6]); the per-action gradients are taken from icepop_ppo_loss at r = 1 by
autograd. "none" and TIS are computed by this script for comparison. IcePop rejects the two
actions with rho > 2: a 2-response batch (with NaN padding) then shows that the loss keeps the
original denominator N = 6, and that renormalising by the N_kept = 4 kept tokens would inflate it
by N / N_kept = 1.5. The toy's smallest rho is .747, so no weight here touches the lower bound:
endpoints and padding are checked by T1/T2, not here.

    python exercises/icepop/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import argparse
import importlib.util
import math

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

F64 = torch.float64
Z0 = [1.0, 0.5, 0.0, -0.5, -1.0, -2.0]
DELTA = [0.0, 0.3, -0.2, 0.0, -1.0, -1.5]
REWARD = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
CONTRAST_RHO = [0.3, 0.5, 1.0, 2.0, 4.0]
ESTIMATORS = ("none", "tis", "icepop", "is")
SWEEP_RHO = (0.1, 6.0, 120)  # views/weights.vl.json: rho from 0.1 to 6, log-spaced, 120 points
# The bands with which YOUR icepop functions produce each estimator (none and TIS are computed here).
IMPL_BOUNDS = {"icepop": (0.5, 2.0), "is": (0.0, 1e6)}


def _toy():
    z0 = torch.tensor(Z0, dtype=F64)
    p0 = torch.softmax(z0, 0)
    q = torch.softmax(z0 + torch.tensor(DELTA, dtype=F64), 0)
    reward = torch.tensor(REWARD, dtype=F64)
    adv = reward - (q * reward).sum()                                   # A_a = R_a - E_q R
    f = adv[:, None] * (torch.eye(6, dtype=F64) - p0[None, :])          # f_a = A_a (e_a - p0)
    return z0, p0, q, adv, f


def _tis(rho: torch.Tensor, low: float = 0.0, high: float = 2.0) -> torch.Tensor:
    return rho.clamp(low, high)


def _strict(rho: torch.Tensor, low: float = 0.5, high: float = 2.0) -> torch.Tensor:
    return torch.where((rho > low) & (rho < high), rho, torch.zeros_like(rho))


def _impl_weights(b, old, rollout, low, high):
    """Queue icepop_weights of the 6 actions (one row) in the batch b; .value[0] is the [6] weights."""
    mask = torch.ones(1, 6, dtype=torch.bool)
    return b.icepop_weights(old[None], rollout[None], mask, low=low, high=high)


def _row(pending, n: int) -> torch.Tensor:
    """The [n] float64 weights of a pending icepop_weights of one row [1, n] (shape checked first)."""
    return check_tensor(pending.value, what="icepop_weights", shape=(1, n))[0].to(F64)


def _impl_grads(b, z0, old, rollout, adv, low, high):
    """Queue icepop_ppo_loss at r = 1 in the batch b; _grads_of(*returned) is the per-action ascent
    gradient g_a = -d loss_a / d z, shape [6, 6].

    Response a is the single token a with its own copy Z[a] of the logits, so the token-mean
    loss over the 6 responses is (1/6) sum_a loss_a and d loss / d Z[a] = (1/6) d loss_a / d z.
    """
    Z = z0[None, :].repeat(6, 1).requires_grad_(True)                 # [6 responses, 6 logits]
    logp = torch.log_softmax(Z, dim=1).diagonal()[:, None]             # [6, 1]: log p(a) in row a
    loss = b.icepop_ppo_loss(logp, old[:, None], rollout[:, None], adv,
                             torch.ones(6, 1, dtype=torch.bool), low=low, high=high)
    return Z, loss


def _grads_of(Z, loss) -> torch.Tensor:
    (grad,) = torch.autograd.grad(check_tensor(loss.value, what="icepop_ppo_loss", shape=()), Z)
    return -6.0 * grad.detach().to(F64)


def _stats(q, p0, f, g):
    target = (p0[:, None] * f).sum(0)                                  # E_p0[f]
    mean = (q[:, None] * g).sum(0)                                     # E_q[g]
    bias = float((mean - target).norm())
    var = float((q * (g ** 2).sum(1)).sum() - (mean ** 2).sum())
    return bias, var


def run(impl, out_dir=None, seed=0) -> dict:
    """Bias/variance table through ``impl``; writes metrics.json and the views when out_dir is given."""
    del seed  # exact enumeration: nothing is random
    z0, p0, q, adv, f = _toy()
    old, rollout = torch.log(p0), torch.log(q)
    rho = p0 / q

    # The inputs of the contrast table, the denominator batch and the views/weights.vl.json sweep (below).
    c_old = torch.log(torch.tensor(CONTRAST_RHO, dtype=F64))
    c_mask = torch.ones(1, 5, dtype=torch.bool)
    d_old = torch.full((2, 4), float("nan"), dtype=F64)
    d_roll = torch.full((2, 4), float("nan"), dtype=F64)
    d_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    d_adv = torch.tensor([1.0, 0.5], dtype=F64)
    d_old[d_mask], d_roll[d_mask] = old, rollout
    s_rho = torch.logspace(math.log10(SWEEP_RHO[0]), math.log10(SWEEP_RHO[1]), SWEEP_RHO[2], dtype=F64)

    # No call to impl depends on another's result: one batch (one round trip under the judge).
    with batch(impl) as b:
        queued = {name: (_impl_weights(b, old, rollout, low, high),
                         _impl_grads(b, z0, old, rollout, adv, low, high))
                  for name, (low, high) in IMPL_BOUNDS.items()}
        c_ice_p = b.icepop_weights(c_old[None], torch.zeros(1, 5, dtype=F64), c_mask)
        d_loss_p = b.icepop_ppo_loss(d_old.clone(), d_old, d_roll, d_adv, d_mask)
        s_w_p = b.icepop_weights(torch.log(s_rho)[None], torch.zeros(1, SWEEP_RHO[2], dtype=F64),
                                 torch.ones(1, SWEEP_RHO[2], dtype=torch.bool))

    weights, grads, grad_mismatch = {}, {}, 0.0
    for name, (w_p, loss_p) in queued.items():
        w = _row(w_p, 6)
        g = _grads_of(*loss_p)
        grad_mismatch = max(grad_mismatch, float((g - w[:, None] * f).abs().max()))
        weights[name], grads[name] = w, g
    for name, w in (("none", torch.ones_like(rho)), ("tis", _tis(rho))):
        weights[name], grads[name] = w, w[:, None] * f

    bias, variance = {}, {}
    for name in ESTIMATORS:
        bias[name], variance[name] = _stats(q, p0, f, grads[name])

    # The contrast table: rho -> weight under TIS, IcePop (yours) and GLM-5's strict interval.
    c_ice = _row(c_ice_p, len(c_old))
    c_rho = torch.exp(c_old)

    # Denominator: 2 responses (actions 0-3 with A = 1, actions 4-5 with A = 0.5; NaN padding).
    # At r = 1 each token's PPO loss is -A, so the loss is -sum_t w_t A_t / N with N = 6.
    loss = float(check_tensor(d_loss_p.value, what="icepop_ppo_loss", shape=()).detach())
    w_ice = torch.where((rho >= 0.5) & (rho <= 2.0), rho, torch.zeros_like(rho))
    a_tok = torch.tensor([1.0, 1, 1, 1, 0.5, 0.5], dtype=F64)          # A per token
    n_valid, n_kept = 6, int((w_ice > 0).sum())
    expected = float(-(w_ice * a_tok).sum() / n_valid)
    renormalised = float(-(w_ice * a_tok).sum() / n_kept)

    metrics = {
        "rho": rho.tolist(),
        "weights": {k: weights[k].tolist() for k in ESTIMATORS},
        "bias_norm": bias,
        "variance": variance,
        "grad_vs_weight_times_f": grad_mismatch,
        "contrast": {"rho": CONTRAST_RHO, "tis": _tis(c_rho).tolist(),
                     "icepop": c_ice.tolist(), "glm5_strict": _strict(c_rho).tolist()},
        "denominator": {"n_valid": n_valid, "n_kept": n_kept, "loss": loss,
                        "loss_expected": expected, "loss_if_renormalised": renormalised,
                        "inflation_n_over_n_kept": n_valid / n_kept},
    }
    # what views/weights.vl.json draws: your weights over a log-spaced rho sweep
    s_w = _row(s_w_p, SWEEP_RHO[2])
    metrics["sweep"] = {"rho": s_rho.tolist(), "icepop": s_w.tolist()}
    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("icepop_impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", required=True, help="your solution file (defines icepop_weights, icepop_ppo_loss)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    a = ap.parse_args()
    m = run(_load(a.impl), a.out)
    print(f"{'':8s}{'||bias||':>10s}{'variance':>10s}")
    for n in ESTIMATORS:
        print(f"{n:8s}{m['bias_norm'][n]:10.5f}{m['variance'][n]:10.4f}")
