"""An independent correct solution of glm5_mis (masked_fill style, explicit native-dtype bounds).

Written apart from reference/glm5_mis/solution.py: padding is removed with masked_fill, the
bounds are built as tensors of the ratio's own dtype, and the token count is a Python int.
"""

import math

import torch


def _validate(clip_low, clip_high, logp, others, advantages=None):
    if math.isnan(clip_low) or clip_low <= 0 or clip_low >= 1:
        raise ValueError(f"clip_low must lie in (0, 1); got {clip_low}")
    if math.isnan(clip_high) or math.isinf(clip_high) or clip_high <= 0:
        raise ValueError(f"clip_high must be finite and positive; got {clip_high}")
    if logp.ndim != 2:
        raise ValueError(f"expected [B, L] inputs, got logp with shape {list(logp.shape)}")
    for name, t in others.items():
        if list(t.shape) != list(logp.shape):
            raise ValueError(f"{name} has shape {list(t.shape)} but logp has shape {list(logp.shape)}")
    if advantages is not None and (advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]):
        raise ValueError(f"advantages must be [B] with B = {logp.shape[0]}, got {list(advantages.shape)}")


def _weights(logp, rollout_logp, pad, clip_low, clip_high):
    diff = (logp.detach() - rollout_logp.detach()).masked_fill(pad, 0.0)
    ratio = diff.exp()
    lo = torch.tensor(1.0 - clip_low, dtype=ratio.dtype, device=ratio.device)
    hi = torch.tensor(1.0 + clip_high, dtype=ratio.dtype, device=ratio.device)
    inside = ratio.gt(lo).logical_and(ratio.lt(hi)).logical_and(pad.logical_not())
    return ratio.masked_fill(inside.logical_not(), 0.0)


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _validate(clip_low, clip_high, logp, {"rollout_logp": rollout_logp, "mask": mask})
    return _weights(logp, rollout_logp, mask == 0, clip_low, clip_high)


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _validate(clip_low, clip_high, logp, {"rollout_logp": rollout_logp, "mask": mask}, advantages)
    pad = mask == 0
    w = _weights(logp, rollout_logp, pad, clip_low, clip_high)
    adv = advantages.detach().to(logp.dtype).unsqueeze(1).expand_as(logp).masked_fill(pad, 0.0)
    terms = (w * adv) * logp.masked_fill(pad, 0.0)
    n_tokens = int(torch.count_nonzero(pad.logical_not()))
    return terms.sum().neg().div(max(1, n_tokens))
