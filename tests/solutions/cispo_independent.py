"""An independent CISPO solution (clamping in log space, masked_fill instead of where).

Written apart from reference/cispo/solution.py to cross-check the tier tests: every tier must
accept it. MiniMax-M1 (arXiv 2506.13585) Eqs. 4-5 with SkyRL's `cispo_anchor`.
"""

import math

import torch


def _validate_eps(eps_low, eps_high):
    if eps_low < 0 or math.isnan(eps_low):
        raise ValueError(f"eps_low={eps_low} is negative")
    if eps_high <= 0 or math.isnan(eps_high):
        raise ValueError(f"eps_high={eps_high} must be positive")


def _same_shape(**tensors):
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    first = next(iter(shapes.values()))
    if len(first) != 2 or any(s != first for s in shapes.values()):
        raise ValueError(f"expected equal 2-D [B, L] shapes, got {shapes}")


def _clamped_exp(log_x, lo, hi):
    """exp(clamp(log_x, log lo, log hi)); lo <= 0 means no lower bound."""
    upper = math.log(hi)
    if lo > 0:
        log_x = log_x.clamp(min=math.log(lo))
    return log_x.clamp(max=upper).exp()


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _validate_eps(eps_low, eps_high)
    _same_shape(logp=logp, anchor_logp=anchor_logp, mask=mask)
    pad = mask == 0
    with torch.no_grad():
        diff = logp.masked_fill(pad, 0.0) - anchor_logp.masked_fill(pad, 0.0)
        w = _clamped_exp(diff, 1.0 - eps_low, 1.0 + eps_high)
        return w.masked_fill(pad, 0.0)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor == "old":
        anchor_logp = old_logp
    elif anchor == "rollout":
        if rollout_logp is None:
            raise ValueError("the rollout anchor requires rollout_logp")
        if tis_enabled:
            raise ValueError("TIS on top of the rollout anchor counts the correction twice")
        anchor_logp = rollout_logp
    else:
        raise ValueError(f"unknown anchor {anchor!r}")
    if tis_enabled and rollout_logp is None:
        raise ValueError("TIS requires rollout_logp")
    _validate_eps(eps_low, eps_high)
    extra = {} if rollout_logp is None else {"rollout_logp": rollout_logp}
    _same_shape(logp=logp, old_logp=old_logp, mask=mask, **extra)
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError(f"advantages must be [B] = [{logp.shape[0]}], got {tuple(advantages.shape)}")

    pad = mask == 0
    coef = cispo_weights(logp, anchor_logp, mask, eps_low, eps_high)
    coef = coef * advantages.detach().to(logp.dtype).unsqueeze(1)  # the loss stays in logp's dtype
    if tis_enabled:
        with torch.no_grad():
            log_rho = old_logp.masked_fill(pad, 0.0) - rollout_logp.masked_fill(pad, 0.0)
            coef = coef * log_rho.clamp(max=math.log(2.0)).exp()
    contrib = (coef.masked_fill(pad, 0.0) * logp.masked_fill(pad, 0.0)).sum()
    n_valid = int((~pad).sum())
    return -contrib / max(n_valid, 1)
