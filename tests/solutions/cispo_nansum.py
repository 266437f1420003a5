"""CORRECT: weights via torch.where, but the loss multiplies the raw logp by the weight (0 at padding) and drops
the 0 * NaN / 0 * inf terms with nansum; the gradient at padding is 0 (nansum's backward is 0 there, times w = 0)."""
import torch


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    if logp.dim() != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    v = mask != 0
    z = torch.zeros((), dtype=logp.dtype)
    d = torch.where(v, logp.detach(), z) - torch.where(v, anchor_logp.detach(), z)
    return torch.where(v, d.exp().clamp(1 - eps_low, 1 + eps_high), z)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout") or (anchor == "rollout" and (rollout_logp is None or tis_enabled)):
        raise ValueError("anchor")
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis")
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    for t in (old_logp, mask) + ((rollout_logp,) if rollout_logp is not None else ()):
        if logp.dim() != 2 or t.shape != logp.shape:
            raise ValueError("shape")
    if advantages.shape != (logp.shape[0],):
        raise ValueError("adv")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    if tis_enabled:
        v = mask != 0
        z = torch.zeros((), dtype=logp.dtype)
        w = w * torch.where(v, (torch.where(v, old_logp.detach(), z) - torch.where(v, rollout_logp.detach(), z)).exp().clamp(0, 2), z)
    term = w * advantages.detach().to(logp.dtype)[:, None] * logp
    return -torch.nansum(term) / max(1, int((mask != 0).sum()))
