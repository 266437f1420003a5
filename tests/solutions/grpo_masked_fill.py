# CORRECT (style): group statistics in float64 (var(correction=0)) cast back to the rewards' dtype;
# the loss with masked_fill, the clipped side chosen by torch.where on the sign of A under no_grad.
import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D, got {tuple(rewards.shape)}")
    if not group_size > 0:
        raise ValueError("group_size must be > 0")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} not divisible by {group_size}")
    x = rewards.to(torch.float64).view(-1, group_size)
    c = x - x.mean(-1, keepdim=True)
    if normalize_std:
        c = c / (x.var(-1, correction=0, keepdim=True).sqrt() + eps)
    return c.flatten().to(rewards.dtype)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or logp.shape != old_logp.shape or logp.shape != mask.shape \
            or advantages.shape != logp.shape[:1]:
        raise ValueError(f"bad shapes logp {tuple(logp.shape)} old {tuple(old_logp.shape)} "
                         f"mask {tuple(mask.shape)} adv {tuple(advantages.shape)}")
    pad = ~mask.bool()
    lr = (logp.masked_fill(pad, 0.0) - old_logp.detach().masked_fill(pad, 0.0))
    adv = advantages.detach().to(logp.dtype).unsqueeze(1)
    with torch.no_grad():
        ratio = lr.exp()
        take_clip = torch.where(adv > 0, ratio > 1 + clip_high, ratio < 1 - clip_low) & (adv != 0)
        const = ratio.clamp(1 - clip_low, 1 + clip_high) * adv
    live = torch.exp(lr.masked_fill(take_clip, 0.0)) * adv
    per = -(live.masked_fill(take_clip, 0.0) + torch.where(take_clip, const, torch.zeros_like(const)))
    per = per.masked_fill(pad, 0.0)
    if per_token_loss:
        return per.sum() / (~pad).sum().clamp_min(1).to(logp.dtype)
    cnt = (~pad).sum(1).clamp_min(1).to(logp.dtype)
    return (per.sum(1) / cnt).sum() / max(1, logp.shape[0])
