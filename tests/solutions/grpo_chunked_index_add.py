# CORRECT (style): float64 group statistics by index_add_ cast back; the loss in chunks of 3 columns of L, summed per row
import torch

def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError("rewards must be 1-D")
    if group_size <= 0 or rewards.numel() % group_size:
        raise ValueError("bad group size")
    n = rewards.numel()
    x = rewards.to(torch.float64)
    gid = torch.arange(n) // group_size
    ng = n // group_size
    s = torch.zeros(ng, dtype=torch.float64).index_add_(0, gid, x)
    mean = s / group_size
    c = x - mean[gid]
    if normalize_std:
        v = torch.zeros(ng, dtype=torch.float64).index_add_(0, gid, c * c) / group_size
        c = c / (v.sqrt()[gid] + eps)
    return c.to(rewards.dtype)

def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2 or tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"shapes {tuple(logp.shape)}, {tuple(old_logp.shape)}, {tuple(mask.shape)}")
    B, L = logp.shape
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages {tuple(advantages.shape)} != {(B,)}")
    A = advantages.detach().to(logp.dtype)[:, None]
    m = mask.bool()
    pieces = []
    CH = 3
    for s in range(0, L, CH):
        mm = m[:, s:s + CH]
        lp = torch.where(mm, logp[:, s:s + CH], 0.0)
        ol = torch.where(mm, old_logp[:, s:s + CH].detach(), 0.0)
        lr = lp - ol
        with torch.no_grad():
            r = torch.exp(lr)
            cv = torch.clamp(r, 1 - clip_low, 1 + clip_high) * A
            pick = ~(r * A <= cv)
        rr = torch.exp(torch.where(pick, 0.0, lr))
        tl = torch.where(pick, -cv, -rr * A)
        tl = torch.where(mm, tl, 0.0)
        pieces.append(tl.sum(1))
    rs = torch.stack(pieces, 0).sum(0) if pieces else (logp.sum(1) * 0)
    n = m.sum(1)
    if per_token_loss:
        out = rs.sum() / n.sum().clamp(min=1)
    else:
        out = (rs / n.clamp(min=1)).sum() / max(B, 1)
    if out.grad_fn is None and logp.requires_grad:
        out = out + 0 * torch.where(m, logp, 0.0).sum()
    return out
