"""CORRECT: everything in float64 then cast back; token-mean as a weighted mean via torch.dot on flattened rows."""
import torch


def _v(eps_low, eps_high, logp, others):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    if logp.dim() != 2 or any(o.shape != logp.shape for o in others):
        raise ValueError("shapes")


def _w64(logp, anchor_logp, valid, eps_low, eps_high):
    d = torch.where(valid, logp.detach() - anchor_logp.detach(), torch.zeros((), dtype=logp.dtype))
    r = torch.exp(d).clamp(1 - eps_low, 1 + eps_high)       # in logp's dtype
    return torch.where(valid, r, torch.zeros((), dtype=logp.dtype)).double()


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _v(eps_low, eps_high, logp, [anchor_logp, mask])
    return _w64(logp, anchor_logp, mask.bool(), eps_low, eps_high).to(logp.dtype)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError("anchor")
    if (anchor == "rollout" or tis_enabled) and rollout_logp is None:
        raise ValueError("rollout_logp")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("double count")
    _v(eps_low, eps_high, logp, [old_logp, mask] + ([rollout_logp] if rollout_logp is not None else []))
    if advantages.shape != (logp.shape[0],):
        raise ValueError("advantages")
    valid = mask.bool()
    w = _w64(logp, old_logp if anchor == "old" else rollout_logp, valid, eps_low, eps_high)
    if tis_enabled:
        z = torch.zeros((), dtype=logp.dtype)
        tau = torch.where(valid, old_logp.detach() - rollout_logp.detach(), z).exp().clamp(0, 2)
        w = w * tau.double()
    coef = (w * advantages.detach().double()[:, None]).reshape(-1)
    lp = torch.where(valid, logp, torch.zeros((), dtype=logp.dtype)).double().reshape(-1)
    n = valid.sum().clamp(min=1).double()
    return (-torch.dot(coef, lp) / n).to(logp.dtype)
