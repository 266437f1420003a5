# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# no neutralisation of logp at all; the weight is selected with where(keep, r, 0) and the loss summed with nansum (NaN/inf padding times a zero weight is NaN and dropped; its gradient is 0).
import math
import torch


def _validate(logp, rollout_logp, mask, clip_low, clip_high):
    if logp.ndim != 2:
        raise ValueError(f"logp must be 2-D, got {tuple(logp.shape)}")
    if tuple(rollout_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError("rollout_logp/mask shape mismatch")
    if not (clip_low > 0 and clip_low < 1):
        raise ValueError(f"clip_low={clip_low}")
    if math.isnan(clip_high) or math.isinf(clip_high) or clip_high <= 0:
        raise ValueError(f"clip_high={clip_high}")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _validate(logp, rollout_logp, mask, clip_low, clip_high)
    valid = mask != 0
    with torch.no_grad():
        d = torch.where(valid, logp - rollout_logp, torch.zeros_like(logp))
        r = d.exp()
        keep = valid & (r > 1 - clip_low) & (r < 1 + clip_high)
        return torch.where(keep, r, torch.zeros_like(r))


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _validate(logp, rollout_logp, mask, clip_low, clip_high)
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages must be [B], got {tuple(advantages.shape)}")
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    coef = w * advantages.detach().to(logp.dtype).unsqueeze(1)      # finite everywhere
    n = (mask != 0).sum().clamp(min=1)
    return -torch.nansum(coef * logp) / n.to(logp.dtype)
