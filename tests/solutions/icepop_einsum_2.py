"""CORRECT: log-space band via exact dtype compare of rho, einsum reductions, integer counts, clamp-capped log ratio."""
import math

import torch


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    if not (math.isfinite(high) and high > 0 and 0 <= low <= high):
        raise ValueError("band")
    for t in (rollout_logp, mask):
        if old_logp.ndim != 2 or t.shape != old_logp.shape:
            raise ValueError("shapes")
    v = mask.to(torch.bool)
    z = torch.zeros_like(old_logp)
    rho = torch.where(v, old_logp, z).detach().sub(torch.where(v, rollout_logp, z).detach()).exp()
    return torch.where(v & (low <= rho) & (rho <= high), rho, z.detach())


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    if logp.ndim != 2 or logp.shape != old_logp.shape:
        raise ValueError("shapes")
    if tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError("adv")
    v = mask.to(torch.bool)
    dt = logp.dtype
    lr = torch.where(v, logp, torch.zeros((), dtype=dt)) - torch.where(v, old_logp.detach(), torch.zeros((), dtype=dt))
    A = advantages.detach().to(dt)
    pos = (A > 0).unsqueeze(1).expand_as(lr)
    lr = torch.where(pos, lr.clamp(max=math.log1p(eps_high) + 1.0), lr)
    r = lr.exp()
    ell = -torch.minimum(torch.einsum("bl,b->bl", r, A), torch.einsum("bl,b->bl", r.clamp(1 - eps_low, 1 + eps_high), A))
    tok = torch.where(v, w * ell, torch.zeros((), dtype=dt))
    if per_token_loss:
        return torch.einsum("bl->", tok) / max(1, int(v.sum().item()))
    n = v.sum(1).clamp(min=1)
    return torch.einsum("b,b->", torch.einsum("bl->b", tok), 1.0 / n.to(dt)) / max(1, logp.shape[0])
