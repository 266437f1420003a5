# CORRECT (style): float64 group statistics via index_add, einsum aggregation with a weight matrix.
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D, got {tuple(rewards.shape)}")
    if group_size <= 0 or rewards.shape[0] % group_size:
        raise ValueError(f"N={rewards.shape[0]} group_size={group_size}")
    N = rewards.shape[0]
    ng = N // group_size
    gid = torch.arange(N, device=rewards.device) // group_size
    r = rewards.double()
    mean = torch.zeros(ng, dtype=torch.float64, device=r.device).index_add_(0, gid, r) / group_size
    c = r - mean[gid]
    if normalize_std:
        var = torch.zeros(ng, dtype=torch.float64, device=r.device).index_add_(0, gid, c * c) / group_size
        c = c / (var.sqrt()[gid] + eps)
    return c.to(rewards.dtype)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2:
        raise ValueError(f"logp {tuple(logp.shape)} must be 2-D")
    for name, t in (("old_logp", old_logp), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"{name} {tuple(t.shape)} != logp {tuple(logp.shape)}")
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages {tuple(advantages.shape)}")
    valid = mask != 0
    dt = logp.dtype
    lr = torch.where(valid, logp, logp.new_zeros(())) - torch.where(valid, old_logp, old_logp.new_zeros(())).detach().to(dt)
    A = advantages.detach().to(dt)[:, None]
    one = torch.ones((), dtype=dt)
    with torch.no_grad():
        r = lr.exp()
        up = (A > 0) & (r > one + clip_high)
        dn = (A < 0) & (r < one - clip_low)
    r = torch.where(up | dn, one.new_ones(()), lr).exp() if False else torch.where(up | dn, torch.zeros_like(lr), lr).exp()
    val = torch.where(up, (1 + clip_high) * A, torch.where(dn, (1 - clip_low) * A, r * A))
    val = -val
    vf = valid.to(dt)
    if per_token_loss:
        W = vf / vf.sum().clamp(min=1)
    else:
        W = vf / vf.sum(1, keepdim=True).clamp(min=1) / max(1, logp.shape[0])
    val = torch.where(valid, val, torch.zeros_like(val))
    return torch.einsum("bl,bl->", val, W)
