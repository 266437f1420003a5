# CORRECT (style): classic PPO min(surr1, surr2) with torch.clamp, masked_fill, overflow avoided by
# clamping the log-ratio of A>0 tokens at log(hi)+1 (those tokens are clipped anyway).
import math
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.dim() != 1 or group_size <= 0 or rewards.numel() % group_size != 0:
        raise ValueError(f"bad rewards {tuple(rewards.shape)} / group_size {group_size}")
    x = rewards.view(-1, group_size)
    mu = x.mean(-1, keepdim=True)
    c = x - mu
    if normalize_std:
        c = c / (x.var(dim=-1, correction=0, keepdim=True).sqrt() + eps)
    return c.flatten()


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.dim() != 2 or logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)}")
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be {tuple(logp.shape[:1])}")
    pad = ~mask.bool()
    lr = logp.masked_fill(pad, 0.0) - old_logp.detach().masked_fill(pad, 0.0)
    A = advantages.detach().to(logp.dtype).unsqueeze(1)
    cap = math.log(1 + clip_high) + 1.0
    lr = torch.where(A > 0, lr.clamp(max=cap), lr)
    ratio = lr.exp()
    s1 = ratio * A
    s2 = ratio.clamp(1 - clip_low, 1 + clip_high) * A
    tok = -torch.minimum(s1, s2)
    tok = tok.masked_fill(pad, 0.0)
    w = (~pad).to(logp.dtype)
    if per_token_loss:
        return tok.sum() / w.sum().clamp_min(1.0)
    return (tok.sum(1) / w.sum(1).clamp_min(1.0)).sum() / max(1, logp.shape[0])
