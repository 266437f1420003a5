"""An independent GRPO solution (group loop, sign-split clipping, explicit weight matrix).

Written apart from reference/grpo/solution.py to cross-check the tier tests: it must pass them all.
"""

import math

import torch


def group_advantages(rewards, group_size, eps=1e-6, normalize_std=True):
    if not torch.is_tensor(rewards) or rewards.ndim != 1:
        raise ValueError(f"rewards: expected a 1-D tensor, got {getattr(rewards, 'shape', rewards)}")
    if type(group_size) is not int or group_size < 1:
        raise ValueError(f"group_size: expected an int >= 1, got {group_size!r}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards cannot be cut into groups of {group_size}")
    pieces = []
    for group in torch.split(rewards, group_size):
        centred = group - group.mean()
        if normalize_std:
            centred = centred / (torch.var(group, correction=0).sqrt() + eps)
        pieces.append(centred)
    if not pieces:
        return rewards.clone()
    return torch.cat(pieces)


def grpo_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, per_token_loss=False):
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)} and mask "
                         f"{tuple(mask.shape)} must share one [B, L] shape")
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be [B] with B = {logp.shape[0]}")
    pad = mask == 0
    lp = logp.masked_fill(pad, 0.0)
    old = old_logp.detach().masked_fill(pad, 0.0)
    adv = advantages.detach().to(logp.dtype)[:, None].expand_as(lp)
    # for A >= 0 a ratio above 1 + clip_high is clipped anyway: cap its log-ratio so that exp cannot
    # overflow (exp's backward at inf sends NaN even through a zero gradient)
    log_ratio = lp - old
    log_ratio = torch.where(adv >= 0, log_ratio.clamp(max=math.log1p(clip_high) + 1.0), log_ratio)
    ratio = log_ratio.exp()
    # min(rA, clip(r)A) = A * min(r, 1 + clip_high) for A >= 0 and A * max(r, 1 - clip_low) for A < 0
    upper = torch.clamp(ratio, max=1.0 + clip_high)
    lower = torch.clamp(ratio, min=1.0 - clip_low)
    surrogate = adv * torch.where(adv >= 0, upper, lower)
    per_token = (-surrogate).masked_fill(pad, 0.0)

    valid = (~pad).to(logp.dtype)
    if per_token_loss:
        weights = valid / valid.sum().clamp(min=1.0)
    else:
        lengths = valid.sum(dim=1, keepdim=True).clamp(min=1.0)
        weights = valid / (lengths * max(logp.shape[0], 1))
    return (weights * per_token).sum()
