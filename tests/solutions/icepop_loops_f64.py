# CORRECT: scalar Python loops, float64 arithmetic inside for the loss (comparison of rho in its own dtype).
import math
import torch


def _band(low, high):
    if not (low >= 0 and low <= high and high > 0 and math.isfinite(high)):
        raise ValueError("band")


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    if old_logp.ndim != 2 or rollout_logp.shape != old_logp.shape or mask.shape != old_logp.shape:
        raise ValueError("shape")
    _band(low, high)
    B, L = old_logp.shape
    out = torch.zeros(B, L, dtype=old_logp.dtype)
    o = old_logp.detach(); r = rollout_logp.detach().to(old_logp.dtype); m = mask.detach()
    for i in range(B):
        for t in range(L):
            if bool(m[i, t] != 0):
                rho = torch.exp(o[i, t] - r[i, t])
                if bool(rho >= low) and bool(rho <= high):
                    out[i, t] = rho
    return out.to(old_logp.device)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    if logp.ndim != 2:
        raise ValueError("2d")
    for t in (old_logp, rollout_logp, mask):
        if t.shape != logp.shape:
            raise ValueError("shape")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError("adv")
    _band(low, high)
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    terms = []
    total = logp.sum() * 0.0 if False else None
    parts = []
    counts = []
    for i in range(B):
        row = []
        a = float(advantages[i].detach())
        for t in range(L):
            if bool(mask[i, t] != 0):
                lr = logp[i, t].double() - old_logp[i, t].detach().double()
                if a > 0 and float(lr) > math.log1p(eps_high):
                    rr = torch.exp(lr.detach())  # clipped: no gradient
                    ell = -(1 + eps_high) * a + 0.0 * lr * 0  # constant
                    ell = torch.zeros((), dtype=torch.float64) - (1 + eps_high) * a
                else:
                    rr = torch.exp(lr)
                    ell = -torch.minimum(rr * a, torch.clamp(rr, 1 - eps_low, 1 + eps_high) * a)
                row.append(float(w[i, t]) * ell)
        parts.append(row)
        counts.append(len(row))
    zero = torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, torch.zeros((), dtype=logp.dtype)).sum().double()
    if per_token_loss:
        s = zero
        for row in parts:
            for x in row:
                s = s + x
        res = s / max(1, sum(counts))
    else:
        s = zero
        for row, n in zip(parts, counts):
            rs = zero
            for x in row:
                rs = rs + x
            s = s + rs / max(1, n)
        res = s / max(1, B)
    return res.to(logp.dtype)
