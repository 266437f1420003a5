# A correct solution in another style: pads heads with -inf; the correction is NaN there but
# selected away by torch.where(m, c, 0) before any sum; masked_fill zeroes the padded gradient.
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


# Neutralises padded heads with masked_fill(-inf) ("a padded token has probability 0"): 0 * log p
# is NaN at padded positions, and torch.where(m, c, 0) selects it away before any sum.
def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    check_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    m = mask.bool()
    m3 = m.unsqueeze(-1)
    zero = torch.zeros((), dtype=logp.dtype)
    lv = torch.where(m, logp, zero)
    rv = torch.where(m, rollout_logp, zero)
    th = train_head_logp.masked_fill(~m3, float("-inf"))
    sh = sampler_head_logp.masked_fill(~m3, float("-inf"))
    w = f((lv - rv).detach().exp(), mode, low, high)
    c = torch.where(m, correction(th, sh, mode, low, high, eps), zero)
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)
    per = -A * w * lv + A * c
    return per.sum() / m.sum().clamp_min(1).to(logp.dtype)
