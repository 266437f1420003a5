"""CORRECT (unusual style): padding neutralised by nan_to_num + where, mask as float multiplier only on finite values."""
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high, advantages=None):
    if math.isnan(clip_low) or clip_low <= 0 or clip_low >= 1:
        raise ValueError(f"clip_low={clip_low}")
    if math.isnan(clip_high) or clip_high <= 0 or clip_high == math.inf:
        raise ValueError(f"clip_high={clip_high}")
    if logp.dim() != 2:
        raise ValueError(f"logp {logp.shape}")
    for name, t in (("rollout_logp", rollout_logp), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"{name} {t.shape} != {logp.shape}")
    if advantages is not None and list(advantages.shape) != [logp.shape[0]]:
        raise ValueError(f"advantages {advantages.shape}")


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    valid = mask.bool()
    lr = torch.where(valid, torch.nan_to_num(logp.detach()) - torch.nan_to_num(rollout_logp.detach()), 0.0)
    r = torch.exp(lr)
    inside = valid.logical_and(r.gt(1 - clip_low)).logical_and(r.lt(1 + clip_high))
    return r.where(inside, r.new_zeros(()))


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    valid = mask.bool()
    safe = torch.where(valid, logp, logp.new_zeros(()))
    coef = w * advantages.detach().to(logp.dtype).unsqueeze(1)
    return -(coef * safe).sum() / valid.sum().clamp_min(1)
