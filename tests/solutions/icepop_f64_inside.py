"""CORRECT: band comparison in the native dtype, but the PPO loss accumulated in float64 and cast back; masked_fill for padding."""
import math

import torch


def _check(low, high):
    ok = (low == low) and (high == high) and 0.0 <= low <= high and high > 0 and high != float("inf")
    if not ok:
        raise ValueError("band")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _check(low, high)
    if old_logp.dim() != 2 or rollout_logp.shape != old_logp.shape or mask.shape != old_logp.shape:
        raise ValueError("shapes")
    pad = mask.eq(0)
    d = old_logp.detach().masked_fill(pad, 0.0) - rollout_logp.detach().masked_fill(pad, 0.0)
    rho = d.exp()
    inside = rho.ge(low).logical_and(rho.le(high)).logical_and(~pad)
    return rho.masked_fill(~inside, 0.0)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _check(low, high)
    if logp.dim() != 2 or any(t.shape != logp.shape for t in (old_logp, rollout_logp, mask)):
        raise ValueError("shapes")
    if advantages.dim() != 1 or advantages.numel() != logp.shape[0]:
        raise ValueError("adv")
    pad = mask.eq(0)
    w = icepop_weights(old_logp, rollout_logp, mask, low, high).double()
    lr = logp.masked_fill(pad, 0.0).double() - old_logp.detach().masked_fill(pad, 0.0).double()
    A = advantages.detach().double().unsqueeze(1).expand_as(lr)
    hot = (A > 0) & (lr > math.log1p(eps_high))
    r = torch.where(hot, lr.detach(), lr).exp()
    surr = torch.maximum(-r * A, -r.clamp(1 - eps_low, 1 + eps_high) * A)
    tok = (w * surr).masked_fill(pad, 0.0)
    m = (~pad).double()
    if per_token_loss:
        out = tok.sum() / m.sum().clamp(min=1)
    else:
        out = (tok.sum(1) / m.sum(1).clamp(min=1)).sum() / max(logp.shape[0], 1)
    return out.to(logp.dtype)
