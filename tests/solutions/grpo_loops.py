# CORRECT (style): python loops over groups and rows; torch.std(unbiased=False); stack.
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.ndim != 1:
        raise ValueError(f"rewards shape {tuple(rewards.shape)} not 1-D")
    if not group_size > 0:
        raise ValueError("group_size")
    if len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} % {group_size} != 0")
    out = []
    for s in range(0, len(rewards), group_size):
        grp = rewards[s:s + group_size]
        c = grp - grp.mean()
        if normalize_std:
            c = c / (torch.std(grp, unbiased=False) + eps) if group_size > 1 else c / eps
        out.append(c)
    if not out:
        return torch.empty(0, dtype=rewards.dtype, device=rewards.device)
    return torch.cat(out)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"bad shapes {tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(mask.shape)}")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)} vs B={B}")
    total = logp.sum() * 0 if False else None
    rows = []
    ntok = 0
    for i in range(B):
        mi = mask[i] != 0
        n = int(mi.sum())
        ntok += n
        a = float(advantages[i])
        lpi = logp[i][mi]
        lri = lpi - old_logp[i][mi].detach()
        with torch.no_grad():
            r0 = lri.exp()
            hi = torch.tensor(1 + clip_high, dtype=logp.dtype)
            lo = torch.tensor(1 - clip_low, dtype=logp.dtype)
            clip = (r0 > hi) if a > 0 else ((r0 < lo) if a < 0 else torch.zeros_like(r0, dtype=torch.bool))
        r = torch.exp(torch.where(clip, torch.zeros_like(lri), lri))
        bound = (1 + clip_high) if a > 0 else (1 - clip_low)
        l = torch.where(clip, torch.full_like(r, -bound * a), -r * a)
        rows.append((l.sum(), n))
    anchor = torch.where(mask != 0, logp, torch.zeros_like(logp)).sum() * 0
    if per_token_loss:
        s = anchor
        for l, _ in rows:
            s = s + l
        return s / max(1, ntok)
    s = anchor
    for l, n in rows:
        s = s + l / max(1, n)
    return s / max(B, 1)
