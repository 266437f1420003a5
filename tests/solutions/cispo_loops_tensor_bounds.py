"""CORRECT: explicit Python loops over responses and tokens (python-float clip via min/max on 0-d tensors), graph kept through logp."""
import torch


def _eps(el, eh):
    if el != el or eh != eh or el < 0 or eh <= 0:
        raise ValueError(f"widths {el} {eh}")


def _sh(ref, *ts):
    if ref.ndim != 2:
        raise ValueError(f"logp {tuple(ref.shape)}")
    for t in ts:
        if t is not None and tuple(t.shape) != tuple(ref.shape):
            raise ValueError(f"{tuple(t.shape)} vs {tuple(ref.shape)}")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _eps(eps_low, eps_high)
    _sh(logp, anchor_logp, mask)
    B, L = logp.shape
    out = torch.zeros((B, L), dtype=logp.dtype)
    lo = torch.tensor(1 - eps_low, dtype=logp.dtype)
    hi = torch.tensor(1 + eps_high, dtype=logp.dtype)
    for b in range(B):
        for t in range(L):
            if bool(mask[b, t]):
                r = torch.exp(logp[b, t].detach() - anchor_logp[b, t].detach())
                out[b, t] = torch.minimum(torch.maximum(r, lo), hi)
    return out


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError("anchor")
    if rollout_logp is None and (anchor == "rollout" or tis_enabled):
        raise ValueError("rollout_logp needed")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("double")
    _eps(eps_low, eps_high)
    _sh(logp, old_logp, mask, rollout_logp)
    if advantages.ndim != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError("adv")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    B, L = logp.shape
    total = torch.where(mask != 0, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0.0
    n = 0
    for b in range(B):
        a = advantages[b].detach().to(logp.dtype)
        for t in range(L):
            if not bool(mask[b, t]):
                continue
            n += 1
            f = w[b, t]
            if tis_enabled:
                rho = torch.exp(old_logp[b, t].detach() - rollout_logp[b, t].detach())
                f = f * torch.clamp(rho, 0.0, 2.0)
            total = total - f * a * logp[b, t]
    return total / max(n, 1)
