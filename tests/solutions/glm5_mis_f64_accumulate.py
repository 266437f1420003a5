"""CORRECT (unusual style): weights decided in native dtype, the loss accumulated in float64 via einsum and cast back."""
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high, advantages=None):
    if not (clip_low > 0 and clip_low < 1):
        raise ValueError(f"clip_low={clip_low}")
    if not (clip_high > 0) or math.isinf(clip_high):
        raise ValueError(f"clip_high={clip_high}")
    if len(logp.shape) != 2 or tuple(rollout_logp.shape) != tuple(logp.shape) or tuple(mask.shape) != tuple(logp.shape):
        raise ValueError("shape mismatch %s %s %s" % (logp.shape, rollout_logp.shape, mask.shape))
    if advantages is not None and (advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]):
        raise ValueError("advantages shape %s" % (advantages.shape,))


def _w(logp, rollout_logp, valid, clip_low, clip_high):
    with torch.no_grad():
        d = torch.where(valid, logp, 0.0) - torch.where(valid, rollout_logp, 0.0)
        r = d.exp()
        keep = (r > 1 - clip_low) & (r < 1 + clip_high) & valid
        return torch.where(keep, r, torch.zeros_like(r))


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    return _w(logp, rollout_logp, mask == 1, clip_low, clip_high)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    valid = mask == 1
    w = _w(logp, rollout_logp, valid, clip_low, clip_high).double()
    lp = torch.where(valid, logp, 0.0).double()
    a = advantages.detach().double()
    num = torch.einsum('bt,b,bt->', w, a, lp)
    n = max(1, int(valid.sum()))
    return (-num / n).to(logp.dtype)
