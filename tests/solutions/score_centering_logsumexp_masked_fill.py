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


# CORRECT: tail masses 1 - exp(logsumexp) (exact where the sum is), rho and 1/rho as two quotients, masked_fill padding, einsum, count via .item().
def correction(th, sh, mode, low, high, eps):
    lp, lq = th.detach(), sh.detach()
    one_m_p = (1 - torch.logsumexp(lp, -1).exp()).clamp_min(eps)
    one_m_q = (1 - torch.logsumexp(lq, -1).exp()).clamp_min(eps)
    rho = one_m_q / one_m_p
    inv = one_m_p / one_m_q
    if mode == "none":
        alpha = rho
    elif mode == "tis":
        alpha = rho * inv.clamp(low, high)
    else:
        alpha = torch.where((inv >= low) & (inv <= high), torch.ones_like(rho), torch.zeros_like(rho))
    w = f((lp - lq).exp(), mode, low, high)
    coef = lq.exp() * w - alpha.unsqueeze(-1) * lp.exp()
    return torch.einsum("...k,...k->...", coef, th)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    check_mode(mode, low, high)
    check_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask)
    pad = mask == 0
    lv = logp.masked_fill(pad, 0.0)
    rv = rollout_logp.masked_fill(pad, 0.0)
    th = train_head_logp.masked_fill(pad.unsqueeze(-1), 0.0)
    sh = sampler_head_logp.masked_fill(pad.unsqueeze(-1), 0.0)
    w = f(torch.exp(lv.detach() - rv.detach()), mode, low, high)
    c = correction(th, sh, mode, low, high, eps)
    A = advantages.detach().to(logp.dtype)[:, None]
    per = A * (c - w * lv)
    n = max(1, int((~pad).sum().item()))
    return per.sum() / n
