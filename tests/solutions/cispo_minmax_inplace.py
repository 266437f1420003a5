# CORRECT: torch.minimum/maximum instead of clamp, in-place ops on own temporaries, N as float
import torch

def _v(lo, hi):
    if lo < 0 or hi <= 0 or lo != lo or hi != hi: raise ValueError("eps")

def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _v(eps_low, eps_high)
    if logp.ndim != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"{logp.shape} {anchor_logp.shape} {mask.shape}")
    valid = mask != 0
    with torch.no_grad():
        d = torch.where(valid, logp, 0).to(logp.dtype)
        d.sub_(torch.where(valid, anchor_logp, 0).to(logp.dtype))
        d.exp_()
        lo = torch.tensor(1.0 - eps_low, dtype=logp.dtype); hi = torch.tensor(1.0 + eps_high, dtype=logp.dtype)
        d = torch.minimum(torch.maximum(d, lo), hi)
        d.mul_(valid)
    return d

def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor == "old":
        anc = old_logp
    elif anchor == "rollout":
        if rollout_logp is None or tis_enabled: raise ValueError("rollout anchor: need rollout_logp, no TIS")
        anc = rollout_logp
    else:
        raise ValueError(f"anchor {anchor!r}")
    if tis_enabled and rollout_logp is None: raise ValueError("tis")
    _v(eps_low, eps_high)
    if logp.ndim != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape or (rollout_logp is not None and rollout_logp.shape != logp.shape):
        raise ValueError("shape")
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]: raise ValueError(f"adv {advantages.shape}")
    valid = mask != 0
    w = cispo_weights(logp, anc, mask, eps_low, eps_high)
    if tis_enabled:
        with torch.no_grad():
            t = torch.where(valid, old_logp - rollout_logp, torch.zeros_like(old_logp)).exp_().clamp_(0, 2).mul_(valid)
        w = w * t
    coef = w * advantages.detach().to(logp.dtype).unsqueeze(-1)
    tok = torch.where(valid, logp, torch.zeros_like(logp)) * coef
    n = valid.sum().to(logp.dtype).clamp(min=1.0)
    return -(tok.sum() / n)
