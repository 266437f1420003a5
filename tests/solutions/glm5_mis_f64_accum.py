# CORRECT: native-dtype ratio and comparison, float64 accumulation of the loss, cast back.
import math
import torch

def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"shapes {logp.shape} {rollout_logp.shape} {mask.shape}")
    if not 0.0 < clip_low < 1.0 or not (0.0 < clip_high < math.inf):
        raise ValueError(f"widths {clip_low} {clip_high}")
    valid = mask != 0
    z = torch.zeros((), dtype=logp.dtype)
    lr = torch.where(valid, logp.detach(), z) - torch.where(valid, rollout_logp, z).detach()
    r = lr.exp()
    inside = valid.logical_and(r > 1 - clip_low).logical_and(r < 1 + clip_high)
    return torch.where(inside, r, z)

def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages {advantages.shape}")
    valid = mask != 0
    lp64 = torch.where(valid, logp, torch.zeros((), dtype=logp.dtype)).double()
    c64 = (w.double() * advantages.detach().double().unsqueeze(1))
    n = valid.sum().double().clamp_min(1.0)
    return (-(c64 * lp64).sum() / n).to(logp.dtype)
