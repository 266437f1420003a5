# CORRECT (unusual style): masked_fill, torch.minimum on a masked copy, einsum weights, var_mean.
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be [N], got {list(rewards.shape)}")
    if not group_size > 0:
        raise ValueError(f"group_size={group_size}")
    N = rewards.numel()
    if N % group_size != 0:
        raise ValueError(f"N={N} % group_size={group_size} != 0")
    gid = torch.arange(N) // group_size
    ng = N // group_size
    sums = torch.zeros(ng, dtype=rewards.dtype).index_add_(0, gid, rewards)
    mean = (sums / group_size)[gid]
    c = rewards - mean
    if not normalize_std:
        return c
    var = torch.zeros(ng, dtype=rewards.dtype).index_add_(0, gid, c * c) / group_size
    return c / (var.sqrt()[gid] + eps)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2:
        raise ValueError(f"logp {list(logp.shape)} is not [B, L]")
    if tuple(old_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"logp {list(logp.shape)}, old_logp {list(old_logp.shape)}, mask {list(mask.shape)}")
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages {list(advantages.shape)} vs B={logp.shape[0]}")
    pad = mask == 0
    lp = logp.masked_fill(pad, 0.0)
    olp = old_logp.detach().masked_fill(pad, 0.0)
    logr = lp - olp
    A = advantages.detach().to(logp.dtype).unsqueeze(1)
    hi = 1.0 + clip_high
    lo = 1.0 - clip_low
    with torch.no_grad():
        rr = logr.exp()
        keep_clip = ((A > 0) & (rr > hi)) | ((A < 0) & (rr < lo))
        keep_clip &= ~pad
    ratio = logr.masked_fill(keep_clip, 0.0).exp()
    surr = torch.minimum(ratio * A, ratio.clamp(lo, hi) * A)
    bnd = torch.where(A > 0, A.new_full((), hi), A.new_full((), lo))
    surr = torch.where(keep_clip, (bnd * A).expand_as(surr), surr)
    loss_tok = (-surr).masked_fill(pad, 0.0)
    valid = (~pad).to(logp.dtype)
    n = valid.sum(1)
    B = logp.shape[0]
    if per_token_loss:
        w = valid / torch.clamp(n.sum(), min=1.0)
    else:
        w = valid / torch.clamp(n, min=1.0).unsqueeze(1) / max(B, 1)
    return torch.einsum("bl,bl->", loss_tok, w)
