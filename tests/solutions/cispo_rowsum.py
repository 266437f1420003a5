"""CORRECT: per-row sums first (sum over L, then over B), nan_to_num-free where() neutralisation, addcmul."""
import torch


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    if logp.ndim != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shapes")
    valid = mask != 0
    one = torch.ones((), dtype=logp.dtype)
    r = torch.where(valid, logp.detach(), one).sub(torch.where(valid, anchor_logp.detach(), one)).exp()
    r = r.clamp(min=1 - eps_low).clamp(max=1 + eps_high)
    return r.where(valid, torch.zeros((), dtype=logp.dtype))


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError("anchor")
    if anchor == "rollout" and (rollout_logp is None or tis_enabled):
        raise ValueError("rollout anchor: needs rollout_logp and no TIS")
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis")
    if rollout_logp is not None and (rollout_logp.ndim != 2 or rollout_logp.shape != logp.shape):
        raise ValueError("rollout_logp shape")
    if logp.ndim != 2 or old_logp.shape != logp.shape or advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError("shapes")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    valid = mask != 0
    z = torch.zeros((), dtype=logp.dtype)
    if tis_enabled:
        w = w * torch.where(valid, old_logp.detach() - rollout_logp.detach(), z).exp().clamp(0, 2)
    lp = torch.where(valid, logp, z)
    per_row = (w * lp).sum(dim=1)                         # [B]
    total = torch.addcmul(z, per_row, advantages.detach().to(logp.dtype)).sum()
    return -total / valid.sum().clamp(min=1).to(logp.dtype)
