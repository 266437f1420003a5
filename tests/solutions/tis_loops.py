# CORRECT: scalar loops over tokens (0-d tensors in the input dtype), stack at the end.
import math
import torch

def _b(lo, hi):
    if math.isnan(lo) or math.isnan(hi) or math.isinf(hi) or hi <= 0 or lo < 0 or lo > hi:
        raise ValueError(f"bad bounds {lo}, {hi}")

def _s(mask, *ts):
    if mask.ndim != 2 or any(t.shape != mask.shape for t in ts):
        raise ValueError(f"shapes {[tuple(t.shape) for t in ts]} mask {tuple(mask.shape)}")

def tis_weights(old_logp, rollout_logp, mask, clip_low=0.0, clip_high=2.0):
    _b(clip_low, clip_high); _s(mask, old_logp, rollout_logp)
    B, L = mask.shape
    out = torch.zeros(B, L, dtype=old_logp.dtype)
    with torch.no_grad():
        for i in range(B):
            for t in range(L):
                if bool(mask[i, t]):
                    rho = torch.exp(old_logp[i, t] - rollout_logp[i, t])
                    out[i, t] = torch.clamp(rho, clip_low, clip_high)
    return out

def tis_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                 tis_low=0.0, tis_high=2.0, per_token_loss=True):
    _b(tis_low, tis_high); _s(mask, logp, old_logp, rollout_logp)
    B, L = mask.shape
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    w = tis_weights(old_logp, rollout_logp, mask, tis_low, tis_high)
    A = advantages.detach().to(logp.dtype)
    lo, hi = 1 - eps_low, 1 + eps_high
    rows, n_all = [], 0
    for i in range(B):
        terms = []
        for t in range(L):
            if not bool(mask[i, t]):
                continue
            lr = logp[i, t] - old_logp[i, t].detach()
            with torch.no_grad():
                rd = torch.exp(lr)
                c = torch.clamp(rd, lo, hi) * A[i]
                clipped = not bool(rd * A[i] <= c)
            if clipped:
                terms.append(w[i, t] * -c)
            else:
                terms.append(w[i, t] * -(torch.exp(lr) * A[i]))
        n_all += len(terms)
        rows.append((torch.stack(terms).sum() if terms else None, len(terms)))
    zero = torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, torch.zeros_like(logp)).sum()
    if per_token_loss:
        tot = zero
        for s, _ in rows:
            if s is not None:
                tot = tot + s
        return tot / max(1, n_all)
    tot = zero
    for s, n in rows:
        if s is not None:
            tot = tot + s / n
    return tot / max(1, B)
