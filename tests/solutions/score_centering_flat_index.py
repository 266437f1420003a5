# A correct solution in another style (a held-out-style probe, written from spec.md alone).
import math
import torch

MODES = ("none", "tis", "mis")


def check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError("mode")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high and high > 0.0):
            raise ValueError("bounds")


def f(x, mode, low, high):
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    keep = (x >= low) & (x <= high)
    return torch.where(keep, x, torch.zeros_like(x))


def correction(th, sh, mode, low, high, eps):
    lp, lq = th.detach(), sh.detach()
    p, q = lp.exp(), lq.exp()
    rho = (1 - q.sum(-1)).clamp_min(eps) / (1 - p.sum(-1)).clamp_min(eps)
    alpha = rho * f(rho.reciprocal(), mode, low, high)
    w = f((lp - lq).exp(), mode, low, high)
    return ((q * w - alpha.unsqueeze(-1) * p) * th).sum(-1)


def check_loss(logp, rollout_logp, th, sh, advantages, mask):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError("adv")
    if th.dim() != 3 or th.shape[:2] != (B, L) or sh.shape != th.shape:
        raise ValueError("heads")


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError("heads")
    return correction(train_head_logp, sampler_head_logp, mode, low, high, eps)


# CORRECT: gathers valid tokens with boolean indexing (no padding ever touches arithmetic) and
# scatters nothing back; empty mask -> graph-connected zero from logp.sum() of an empty selection.
def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    check_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    m = mask != 0
    B, L = logp.shape
    A = advantages.detach().to(logp.dtype).unsqueeze(1).expand(B, L)[m]
    lv = logp[m]
    rv = rollout_logp.detach()[m]
    th = train_head_logp[m]
    sh = sampler_head_logp[m]
    w = f(torch.exp(lv.detach() - rv), mode, low, high)
    c = correction(th, sh, mode, low, high, eps)
    tot = (-A * w * lv).sum() + (A * c).sum()
    return tot / max(1, lv.numel())
