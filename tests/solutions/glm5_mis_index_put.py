"""CORRECT: valid tokens taken with masked_select (flat), the weights written back with an index-put on its own zero tensor; advantages expanded then selected; denominator a Python int."""
import math
import torch

def _v(logp, rollout_logp, mask, lo, hi, adv=None):
    lo, hi = float(lo), float(hi)
    if not (0.0 < lo < 1.0) or not (hi > 0.0) or not math.isfinite(hi):
        raise ValueError("widths")
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    if adv is not None and list(adv.shape) != [logp.shape[0]]:
        raise ValueError("adv")

def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _v(logp, rollout_logp, mask, clip_low, clip_high)
    v = mask.bool()
    r = torch.exp(logp.detach().masked_select(v) - rollout_logp.detach().masked_select(v))
    out = torch.zeros(logp.shape, dtype=logp.dtype)
    out[v] = torch.where((r > 1 - clip_low) & (r < 1 + clip_high), r, torch.zeros_like(r))
    return out

def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _v(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    v = mask.bool()
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high).masked_select(v)
    a = advantages.detach().to(logp.dtype)[:, None].expand(logp.shape).masked_select(v)
    lp = logp.masked_select(v)
    return -(w * a * lp).sum() / max(1, lp.numel())
