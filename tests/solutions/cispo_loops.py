# CORRECT: scalar loops, math in the input dtype via 0-d tensors, graph built from logp elements.
import torch


def _chk_eps(el, eh):
    if not (el >= 0) or not (eh > 0):
        raise ValueError("eps")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _chk_eps(eps_low, eps_high)
    if logp.dim() != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape or anchor_logp.dim() != 2:
        raise ValueError(f"shapes {logp.shape} {anchor_logp.shape} {mask.shape}")
    B, L = logp.shape
    out = torch.zeros(B, L, dtype=logp.dtype)
    lp, an = logp.detach(), anchor_logp.detach()
    for b in range(B):
        for t in range(L):
            if mask[b, t] != 0:
                r = torch.exp(lp[b, t] - an[b, t].to(logp.dtype))
                out[b, t] = torch.clamp(r, 1 - eps_low, 1 + eps_high)
    return out


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor != "old" and anchor != "rollout":
        raise ValueError("anchor")
    if rollout_logp is None and (anchor == "rollout" or tis_enabled):
        raise ValueError("rollout_logp required")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("double counting")
    _chk_eps(eps_low, eps_high)
    for t in [old_logp, mask] + ([rollout_logp] if rollout_logp is not None else []):
        if t.shape != logp.shape:
            raise ValueError("shape")
    if logp.dim() != 2:
        raise ValueError("2-D")
    if advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]:
        raise ValueError("advantages")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    B, L = logp.shape
    total = torch.zeros((), dtype=logp.dtype) + 0.0 * torch.where(torch.zeros_like(mask, dtype=torch.bool), logp, 0).sum()
    n = 0
    for b in range(B):
        a = advantages[b].detach().to(logp.dtype)
        for t in range(L):
            if mask[b, t] != 0:
                n += 1
                f = w[b, t] * a
                if tis_enabled:
                    d = old_logp[b, t].detach().to(logp.dtype) - rollout_logp[b, t].detach().to(logp.dtype)
                    f = f * torch.clamp(torch.exp(d), 0.0, 2.0)
                total = total + f * logp[b, t]
    return -total / max(1, n)
