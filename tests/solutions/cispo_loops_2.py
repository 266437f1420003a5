"""CORRECT: per-token Python loop, float math per scalar in the input dtype, graph-connected zero."""
import torch


def _eps(el, eh):
    if el < 0 or eh <= 0:
        raise ValueError("eps")


def _sh(*ts):
    for t in ts:
        if t.ndim != 2 or t.shape != ts[0].shape:
            raise ValueError("shape")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _eps(eps_low, eps_high)
    _sh(logp, anchor_logp, mask)
    B, L = logp.shape
    out = torch.zeros((B, L), dtype=logp.dtype)
    with torch.no_grad():
        for b in range(B):
            for t in range(L):
                if bool(mask[b, t] != 0):
                    out[b, t] = torch.clamp(torch.exp(logp[b, t] - anchor_logp[b, t]), 1 - eps_low, 1 + eps_high)
    return out


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor != "old" and anchor != "rollout":
        raise ValueError("anchor")
    if anchor == "rollout":
        if rollout_logp is None or tis_enabled:
            raise ValueError("rollout")
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis")
    _eps(eps_low, eps_high)
    _sh(*([logp, old_logp, mask] + ([] if rollout_logp is None else [rollout_logp])))
    B, L = logp.shape
    if advantages.ndim != 1 or len(advantages) != B:
        raise ValueError("adv")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    acc = torch.where(torch.zeros(B, L, dtype=torch.bool), logp, torch.zeros((), dtype=logp.dtype)).sum()
    n = 0
    for b in range(B):
        for t in range(L):
            if bool(mask[b, t] == 0):
                continue
            n += 1
            k = w[b, t]
            if tis_enabled:
                k = k * torch.clamp(torch.exp(old_logp[b, t].detach() - rollout_logp[b, t].detach()), 0, 2)
            acc = acc - k * advantages[b].detach().to(logp.dtype) * logp[b, t]
    return acc / max(n, 1)
