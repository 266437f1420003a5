# CORRECT: scalar loops over tokens, native-dtype 0-d tensors, stack at the end.
import math
import torch

def _check(logp, rollout_logp, mask, lo, hi):
    if logp.ndim != 2 or tuple(rollout_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"bad shapes {tuple(logp.shape)} {tuple(rollout_logp.shape)} {tuple(mask.shape)}")
    if not (lo > 0 and lo < 1):
        raise ValueError(f"bad clip_low {lo}")
    if not (math.isfinite(hi) and hi > 0):
        raise ValueError(f"bad clip_high {hi}")

def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    B, L = logp.shape
    out = torch.zeros(B, L, dtype=logp.dtype)
    with torch.no_grad():
        for b in range(B):
            for t in range(L):
                if bool(mask[b, t]):
                    r = torch.exp(logp[b, t] - rollout_logp[b, t])
                    if bool(r > 1 - clip_low) and bool(r < 1 + clip_high):
                        out[b, t] = r
    return out

def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    B, L = logp.shape
    if advantages.ndim != 1 or advantages.shape[0] != B:
        raise ValueError(f"advantages {tuple(advantages.shape)} vs B={B}")
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    A = advantages.detach().to(logp.dtype)
    terms = []
    n = 0
    for b in range(B):
        for t in range(L):
            if bool(mask[b, t]):
                n += 1
                terms.append(w[b, t] * A[b] * logp[b, t])
    total = torch.stack(terms).sum() if terms else torch.where(torch.zeros_like(logp, dtype=torch.bool), logp, torch.zeros_like(logp)).sum()
    return -total / max(1, n)
