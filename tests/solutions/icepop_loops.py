"""CORRECT: explicit Python loops over responses and tokens, scalars built with torch ops so the graph stays."""
import math

import torch


def _band(low, high):
    if math.isnan(low) or math.isnan(high) or low < 0 or high < low or math.isinf(high) or high <= 0:
        raise ValueError("band")


def _shapes(ts):
    for t in ts:
        if t.ndim != 2 or tuple(t.shape) != tuple(ts[0].shape):
            raise ValueError("shape")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    _band(low, high)
    _shapes([old_logp, rollout_logp, mask])
    B, L = old_logp.shape
    out = torch.zeros(B, L, dtype=old_logp.dtype)
    with torch.no_grad():
        for i in range(B):
            for t in range(L):
                if bool(mask[i, t]):
                    rho = torch.exp(old_logp[i, t] - rollout_logp[i, t])
                    if bool(rho >= low) and bool(rho <= high):
                        out[i, t] = rho
    return out


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    _band(low, high)
    _shapes([logp, old_logp, rollout_logp, mask])
    B, L = logp.shape
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError("adv")
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    total = logp.sum() * 0 if False else None
    rows = []
    ntot = 0
    graph_zero = torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, torch.zeros((), dtype=logp.dtype)).sum()
    for i in range(B):
        a = float(advantages[i])
        acc = graph_zero
        n = 0
        for t in range(L):
            if not bool(mask[i, t]):
                continue
            n += 1
            if float(w[i, t]) == 0.0:
                acc = acc + logp[i, t].detach() * 0 if False else acc
                continue
            lr = logp[i, t] - old_logp[i, t].detach()
            if a > 0 and float(lr) > math.log1p(eps_high):
                lr = lr.detach()
            r = torch.exp(lr)
            un = r * a
            cl = torch.clamp(r, 1 - eps_low, 1 + eps_high) * a
            acc = acc + w[i, t] * -torch.minimum(un, cl)
        ntot += n
        rows.append((acc, n))
    if per_token_loss:
        s = graph_zero
        for acc, _ in rows:
            s = s + acc
        return s / max(1, ntot)
    s = graph_zero
    for acc, n in rows:
        s = s + acc / max(1, n)
    return s / max(1, B)
