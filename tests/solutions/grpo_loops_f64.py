# CORRECT (unusual style): Python loops over groups/tokens, float64 inside, Python-int counts.
import math
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not torch.is_tensor(rewards) or rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D, got {tuple(rewards.shape) if torch.is_tensor(rewards) else type(rewards)}")
    if group_size <= 0 or rewards.shape[0] % group_size:
        raise ValueError(f"bad group_size {group_size} for N={rewards.shape[0]}")
    out = torch.empty_like(rewards)
    r64 = rewards.detach().to(torch.float64)
    for g in range(rewards.shape[0] // group_size):
        sl = slice(g * group_size, (g + 1) * group_size)
        x = r64[sl]
        mu = x.mean()
        c = x - mu
        if normalize_std:
            sd = torch.sqrt(torch.mean(c * c))
            c = c / (sd + eps)
        out[sl] = c.to(rewards.dtype)
    return out


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes: logp {tuple(logp.shape)} old_logp {tuple(old_logp.shape)} mask {tuple(mask.shape)}")
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages {tuple(advantages.shape)} must be [{logp.shape[0]}]")
    B, L = logp.shape
    dt = logp.dtype
    lo, hi = 1 - clip_low, 1 + clip_high
    mb = mask.to(torch.bool)
    total = logp.new_zeros(()) + (logp.masked_fill(torch.ones_like(mb), 0)).sum()  # graph-connected 0
    counts = [int(mb[i].sum().item()) for i in range(B)]
    old = old_logp.detach()
    A = advantages.detach().to(dt)
    for i in range(B):
        if counts[i] == 0:
            continue
        idx = mb[i].nonzero().flatten()
        lr = logp[i, idx] - old[i, idx]
        a = A[i]
        with torch.no_grad():
            r0 = torch.exp(lr)
            clip = (r0 > hi) if a > 0 else ((r0 < lo) if a < 0 else torch.zeros_like(r0, dtype=torch.bool))
        r = torch.exp(lr.masked_fill(clip, 0))
        bound = hi if a > 0 else lo
        tok = torch.where(clip, -bound * a * torch.ones_like(r), -r * a)
        if per_token_loss:
            total = total + tok.sum()
        else:
            total = total + tok.sum() / counts[i]
    if per_token_loss:
        return total / max(1, sum(counts))
    return total / B if B > 0 else total
