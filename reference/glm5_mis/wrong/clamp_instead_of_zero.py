"""Clamps the ratio to [1 - clip_low, 1 + clip_high] (TIS) instead of zeroing tokens outside the interval.

T3's stale bandit also rejects it (final P(best) 0.993 with no zero-gradient update).

expect: T1
"""

import math

import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high, advantages=None):
    if not (0.0 < clip_low < 1.0) or not (math.isfinite(clip_high) and clip_high > 0.0):
        raise ValueError(f"bad widths clip_low={clip_low}, clip_high={clip_high}")
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes {tuple(logp.shape)}, {tuple(rollout_logp.shape)}, {tuple(mask.shape)}")
    if advantages is not None and tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError(f"advantages shape {tuple(advantages.shape)}, expected ({logp.shape[0]},)")


def _weights(logp, rollout_logp, mask, clip_low, clip_high):
    valid = mask != 0
    zero = torch.zeros((), dtype=logp.dtype)
    ratio = torch.exp(torch.where(valid, logp.detach() - rollout_logp.detach(), zero))
    keep = valid & (ratio > 1.0 - clip_low) & (ratio < 1.0 + clip_high)
    return valid, torch.where(valid, ratio.clamp(1.0 - clip_low, 1.0 + clip_high), zero)


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    return _weights(logp, rollout_logp, mask, clip_low, clip_high)[1]


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    valid, w = _weights(logp, rollout_logp, mask, clip_low, clip_high)
    zero = torch.zeros((), dtype=logp.dtype)
    adv = advantages.detach().to(logp.dtype)[:, None]
    per_token = torch.where(valid, w * adv, zero) * torch.where(valid, logp, zero)
    n = valid.sum().clamp(min=1).to(logp.dtype)
    return -per_token.sum() / n
