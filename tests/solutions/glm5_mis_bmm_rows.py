"""CORRECT: per-row dot products of the weights and the neutralised logp via torch.bmm, the advantage applied per row, zeros as 0-d tensors of the input dtype."""
import math
import torch

def _v(logp, rollout_logp, mask, lo, hi, adv=None):
    if not (lo == lo and hi == hi and 0 < lo < 1 and 0 < hi and not math.isinf(hi)):
        raise ValueError("widths")
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    if adv is not None and (adv.dim() != 1 or adv.shape[0] != logp.shape[0]):
        raise ValueError("adv")

def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    _v(logp, rollout_logp, mask, clip_low, clip_high)
    v = mask != 0
    zero = torch.zeros((), dtype=logp.dtype)
    lr = torch.where(v, logp.detach(), zero) - torch.where(v, rollout_logp.detach(), zero)
    r = lr.exp()
    return torch.where(v & (r > 1 - clip_low) & (r < 1 + clip_high), r, zero)

def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    _v(logp, rollout_logp, mask, clip_low, clip_high, advantages)
    B, L = logp.shape
    v = mask != 0
    w = masked_is_weights(logp, rollout_logp, mask, clip_low, clip_high)
    lp = torch.where(v, logp, torch.zeros((), dtype=logp.dtype))
    rows = torch.bmm(w.unsqueeze(1), lp.unsqueeze(2)).reshape(B)
    a = advantages.detach().to(logp.dtype)
    return -(rows * a).sum() / v.sum().clamp(min=1).to(logp.dtype)
