# CORRECT: valid positions found with mask == True (float 1.0 == True, int 1 == True).
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D, got {tuple(logp.shape)}")
    if rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shape mismatch {tuple(logp.shape)} {tuple(rollout_logp.shape)} {tuple(mask.shape)}")
    if not (0 < clip_low < 1):
        raise ValueError(f"clip_low {clip_low}")
    if not (math.isfinite(clip_high) and clip_high > 0):
        raise ValueError(f"clip_high {clip_high}")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    m = (mask == True)
    lp = torch.where(m, logp.detach(), torch.zeros_like(logp))
    rl = torch.where(m, rollout_logp.detach(), torch.zeros_like(logp))
    r = torch.exp(lp - rl)
    keep = m & (r > 1 - clip_low) & (r < 1 + clip_high)
    return torch.where(keep, r, torch.zeros_like(r))


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages shape {tuple(advantages.shape)}")
    m = mask.bool()
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    A = advantages.detach().to(logp.dtype)[:, None].expand_as(logp)
    lp = torch.where(m, logp, torch.zeros_like(logp))
    coef = torch.where(m, w * A, torch.zeros_like(w))
    n = max(1, int(m.sum()))
    return -(coef * lp).sum() / n
