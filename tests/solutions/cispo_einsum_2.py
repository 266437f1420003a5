"""CORRECT: einsum reduction, clamp via minimum/maximum, bool mask via .bool()."""
import torch


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    if not (logp.ndim == anchor_logp.ndim == mask.ndim == 2) or not (logp.shape == anchor_logp.shape == mask.shape):
        raise ValueError("shape")
    v = mask.bool()
    lp = torch.where(v, logp.detach(), torch.zeros_like(logp).detach())
    an = torch.where(v, anchor_logp.detach(), torch.zeros_like(logp).detach())
    r = (lp - an).exp()
    lo = torch.tensor(1 - eps_low, dtype=logp.dtype)
    hi = torch.tensor(1 + eps_high, dtype=logp.dtype)
    r = torch.minimum(torch.maximum(r, lo), hi)
    return torch.where(v, r, torch.zeros((), dtype=logp.dtype))


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor not in {"old", "rollout"}:
        raise ValueError("anchor")
    if rollout_logp is None and (anchor == "rollout" or tis_enabled):
        raise ValueError("need rollout")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("double")
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    for t in [old_logp, mask] + ([rollout_logp] if rollout_logp is not None else []):
        if t.ndim != 2 or t.shape != logp.shape or logp.ndim != 2:
            raise ValueError("shape")
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError("adv")
    v = mask.bool()
    w = cispo_weights(logp, {"old": old_logp, "rollout": rollout_logp}[anchor], mask, eps_low, eps_high)
    if tis_enabled:
        z = torch.zeros((), dtype=logp.dtype)
        w = w * (torch.where(v, old_logp.detach(), z) - torch.where(v, rollout_logp.detach(), z)).exp().clamp(0, 2)
    lp = torch.where(v, logp, torch.zeros((), dtype=logp.dtype))
    s = torch.einsum("bl,bl,b->", w, lp, advantages.detach().to(logp.dtype))
    return -s / max(1, int(v.sum()))
