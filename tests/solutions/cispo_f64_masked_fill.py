"""CORRECT: masked_fill padding; ratio in the input dtype, reduction in float64 with the result cast back."""
import torch


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if not (eps_low >= 0 and eps_high > 0):
        if eps_low < 0 or eps_high <= 0:
            raise ValueError("eps")
    if logp.dim() != 2 or anchor_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError("shape")
    pad = mask == 0
    d = logp.detach().masked_fill(pad, 0) - anchor_logp.detach().masked_fill(pad, 0)
    return d.exp().clamp(1 - eps_low, 1 + eps_high).masked_fill(pad, 0)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    checks = {"old": lambda: (tis_enabled and rollout_logp is None),
              "rollout": lambda: rollout_logp is None or tis_enabled}
    if not isinstance(anchor, str) or anchor not in checks or checks[anchor]():
        raise ValueError("anchor/tis")
    if rollout_logp is not None and rollout_logp.shape != logp.shape:
        raise ValueError("rollout shape")
    if old_logp.shape != logp.shape:
        raise ValueError("old shape")
    w = cispo_weights(logp, rollout_logp if anchor == "rollout" else old_logp, mask, eps_low, eps_high)
    if advantages.shape != logp.shape[:1]:
        raise ValueError("adv")
    pad = mask == 0
    if tis_enabled:
        tau = (old_logp.detach().masked_fill(pad, 0) - rollout_logp.detach().masked_fill(pad, 0)).exp().clamp(0, 2)
        w = w * tau
    term = (w.double() * advantages.detach().double()[:, None]) * logp.masked_fill(pad, 0).double()
    out = -term.masked_fill(pad, 0).sum() / (~pad).sum().clamp(min=1)
    return out.to(logp.dtype)
