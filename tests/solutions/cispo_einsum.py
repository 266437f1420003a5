# CORRECT: einsum reduction with a float mask in logp's dtype; the ratio clamp via torch.minimum/maximum.
import torch


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if eps_low < 0:
        raise ValueError("eps_low must be >= 0")
    if not eps_high > 0:
        raise ValueError("eps_high must be > 0")
    if logp.ndim != 2 or logp.shape != anchor_logp.shape or logp.shape != mask.shape:
        raise ValueError(f"{tuple(logp.shape)} {tuple(anchor_logp.shape)} {tuple(mask.shape)}")
    valid = mask.bool()
    zero = logp.new_zeros(())
    lr = torch.where(valid, logp.detach() - anchor_logp.detach().to(logp.dtype), zero)
    r = lr.exp()
    lo = torch.tensor(1 - eps_low, dtype=logp.dtype)
    hi = torch.tensor(1 + eps_high, dtype=logp.dtype)
    return torch.where(valid, torch.minimum(torch.maximum(r, lo), hi), zero)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError(anchor)
    if (anchor == "rollout" or tis_enabled) and rollout_logp is None:
        raise ValueError("rollout_logp missing")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("tis with rollout anchor")
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape or (
            rollout_logp is not None and rollout_logp.shape != logp.shape):
        raise ValueError("shapes")
    if advantages.shape != logp.shape[:1]:
        raise ValueError("advantages")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    valid = mask.bool()
    zero = logp.new_zeros(())
    if tis_enabled:
        d = torch.where(valid, old_logp.detach().to(logp.dtype) - rollout_logp.detach().to(logp.dtype), zero)
        w = w * torch.where(valid, d.exp().clamp(0.0, 2.0), zero)
    mf = valid.to(logp.dtype)
    lp = torch.where(valid, logp, zero)
    s = torch.einsum("bl,bl,bl,b->", mf, w, lp, advantages.detach().to(logp.dtype))
    return -s / mf.sum().clamp(min=1)
