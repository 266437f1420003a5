"""An independent GSPO solution (written apart from reference/gspo): masked_fill for the padding,
an explicit clipped/unclipped selection instead of min(), a loop-free but differently shaped
computation. It must pass every tier."""

import torch


def _shapes_ok(logp, old_logp, mask):
    if logp.ndim != 2:
        raise ValueError(f"expected logp of shape [B, L], got {list(logp.shape)}")
    for name, t in (("old_logp", old_logp), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"{name} has shape {list(t.shape)} but logp has shape {list(logp.shape)}")


def _mean_log_ratio(logp, old_logp, mask):
    keep = mask != 0
    delta = (logp - old_logp.detach()).masked_fill(~keep, 0.0)
    count = keep.sum(dim=1).to(logp.dtype)
    safe = torch.where(count > 0, count, torch.ones_like(count))
    return delta.sum(dim=1) / safe, keep.any(dim=1)


def sequence_ratio(logp, old_logp, mask):
    _shapes_ok(logp, old_logp, mask)
    mean, _ = _mean_log_ratio(logp, old_logp, mask)
    return mean.exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _shapes_ok(logp, old_logp, mask)
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages must have shape [{logp.shape[0]}], got {list(advantages.shape)}")
    mean, nonempty = _mean_log_ratio(logp, old_logp, mask)
    A = advantages.detach().to(mean.dtype)
    s_value = mean.detach().exp()
    upper = torch.full_like(s_value, 1.0 + clip_eps)
    lower = torch.full_like(s_value, 1.0 - clip_eps)
    too_high = (A > 0) & (s_value > upper)
    too_low = (A < 0) & (s_value < lower)
    bound = torch.where(too_high, upper, lower)
    # a clipped response's s never enters the graph (exp's backward at an overflowed s is NaN)
    s = mean.masked_fill(too_high | too_low, 0.0).exp()
    objective = torch.where(too_high | too_low, bound * A, s * A)
    objective = objective.masked_fill(~nonempty, 0.0)
    B = logp.shape[0]
    return objective.sum().neg() / (B if B > 0 else 1)
