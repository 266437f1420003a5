# CORRECT (style): group sums by index_add_ over group ids; the loss on the valid tokens only
# (boolean indexing logp[mask]), per-row sums scattered back with index_add.
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D, got {tuple(rewards.shape)}")
    if group_size <= 0 or rewards.shape[0] % group_size:
        raise ValueError(f"group_size {group_size} invalid for N={rewards.shape[0]}")
    gid = torch.arange(rewards.shape[0]) // group_size
    ng = rewards.shape[0] // group_size
    s = torch.zeros(ng, dtype=rewards.dtype).index_add_(0, gid, rewards)
    mean = (s / group_size)[gid]
    c = rewards - mean
    if not normalize_std:
        return c
    v = torch.zeros(ng, dtype=rewards.dtype).index_add_(0, gid, c * c) / group_size
    return c / (v.sqrt()[gid] + eps)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes logp={tuple(logp.shape)} old={tuple(old_logp.shape)} mask={tuple(mask.shape)}")
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages shape {tuple(advantages.shape)}")
    B, L = logp.shape
    m = mask.bool()
    rows = torch.arange(B).unsqueeze(1).expand(B, L)[m]
    lp = logp[m]
    olp = old_logp.detach()[m]
    A = advantages.detach().to(logp.dtype)[rows]
    d = lp - olp
    with torch.no_grad():
        r = d.exp()
        cl = torch.where(A > 0, r > 1 + clip_high, r < 1 - clip_low) & (A != 0)
    s1 = torch.exp(torch.where(cl, torch.zeros_like(d), d)) * A
    s2 = r.clamp(1 - clip_low, 1 + clip_high) * A
    per = -torch.where(cl, s2, s1)
    if per_token_loss:
        return per.sum() / max(1, per.numel())
    rs = torch.zeros(B, dtype=logp.dtype).index_add(0, rows, per)
    n = m.sum(1).clamp(min=1).to(logp.dtype)
    # lp.sum() * 0 keeps an all-empty mask (no valid token) connected to logp's graph
    return (rs / n).sum() / max(1, B) + lp.sum() * 0
