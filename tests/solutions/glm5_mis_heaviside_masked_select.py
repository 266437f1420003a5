# A correct solution in another style (a held-out-style probe, written from spec.md alone):
# band test through torch.heaviside on r - bound (sign of a difference in the input dtype is exact), compacted valid tokens via masked_select, scatter back with zeros.
import math
import torch


def _check(logp, rollout_logp, mask, clip_low, clip_high, advantages=None):
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"bad shapes {tuple(logp.shape)}, {tuple(rollout_logp.shape)}, {tuple(mask.shape)}")
    if advantages is not None and list(advantages.shape) != [logp.shape[0]]:
        raise ValueError(f"advantages shape {tuple(advantages.shape)}")
    if not 0.0 < clip_low < 1.0:
        raise ValueError("clip_low")
    if not (clip_high > 0.0 and clip_high != math.inf):
        raise ValueError("clip_high")


def _w(logp, rollout_logp, mask, clip_low, clip_high):
    dt = logp.dtype
    valid = mask.to(torch.bool)
    lr = torch.masked_select(logp.detach(), valid) - torch.masked_select(rollout_logp.detach(), valid)
    r = torch.exp(lr)
    lo = torch.tensor(1 - clip_low, dtype=torch.float64).to(dt)   # python double, then the input dtype
    hi = torch.tensor(1 + clip_high, dtype=torch.float64).to(dt)
    zero = torch.zeros((), dtype=dt)
    above = torch.heaviside(torch.where(torch.isinf(r), -torch.ones_like(r), r - lo), zero)
    below = torch.heaviside(torch.where(torch.isinf(r), -torch.ones_like(r), hi - r), zero)
    keep = (above * below) > 0
    wv = torch.where(keep, r, torch.zeros_like(r))
    out = torch.zeros(logp.shape, dtype=dt)
    out = out.masked_scatter(valid, wv)
    return out, valid


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high)
    return _w(logp, rollout_logp, mask, clip_low, clip_high)[0]


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _check(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    w, valid = _w(logp, rollout_logp, mask, clip_low, clip_high)
    A = advantages.detach().to(logp.dtype)
    lp = torch.where(valid, logp, torch.zeros((), dtype=logp.dtype))
    rows = (w * lp).sum(1)                     # [B]
    total = -(rows * A).sum() if A.numel() else lp.sum()
    return total / max(1, int(valid.sum()))
