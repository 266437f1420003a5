"""CORRECT: keep mask built with torch.logical_and on native-dtype comparisons, loss as torch.dot of flattened vectors over the valid tokens selected with torch.where."""
import math
import torch


def _chk(cl, ch):
    if not (cl > 0 and cl < 1):
        raise ValueError("clip_low")
    if not (ch > 0 and ch < math.inf):
        raise ValueError("clip_high")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _chk(clip_low, clip_high)
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shapes")
    v = mask != 0
    zero = torch.zeros((), dtype=logp.dtype)
    d = torch.where(v, logp.detach(), zero) - torch.where(v, rollout_logp.detach(), zero)
    r = torch.exp(d)
    keep = torch.logical_and(torch.logical_and(v, r > 1 - clip_low), r < 1 + clip_high)
    return torch.where(keep, r, zero)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    if advantages.dim() != 1 or advantages.numel() != logp.shape[0]:
        raise ValueError("advantages")
    v = mask != 0
    zero = torch.zeros((), dtype=logp.dtype)
    coef = (w * advantages.detach().to(logp.dtype).unsqueeze(1)).reshape(-1)
    lp = torch.where(v, logp, zero).reshape(-1)
    return -torch.dot(coef, lp) / v.sum().clamp(min=1).to(logp.dtype)
