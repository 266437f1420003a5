"""CORRECT: masked_fill neutralisation, log-ratio via where, the weights via torch.minimum/maximum, loss as an einsum."""
import torch


def _shapes(logp, others, advantages=None):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D, got {tuple(logp.shape)}")
    for name, t in others:
        if t.shape != logp.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, logp {tuple(logp.shape)}")
    if advantages is not None and (advantages.dim() != 1 or advantages.shape[0] != logp.shape[0]):
        raise ValueError(f"advantages must be [{logp.shape[0]}], got {tuple(advantages.shape)}")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if not (eps_low >= 0 and eps_high > 0):
        raise ValueError("eps_low >= 0 and eps_high > 0")
    _shapes(logp, [("anchor_logp", anchor_logp), ("mask", mask)])
    pad = mask == 0
    with torch.no_grad():
        delta = logp.masked_fill(pad, 0.0) - anchor_logp.masked_fill(pad, 0.0)
        r = delta.exp()
        lo = torch.tensor(1.0 - eps_low, dtype=logp.dtype)
        hi = torch.tensor(1.0 + eps_high, dtype=logp.dtype)
        r = torch.minimum(torch.maximum(r, lo), hi)
        return r.masked_fill(pad, 0.0)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor != "old" and anchor != "rollout":
        raise ValueError(f"unknown anchor {anchor!r}")
    if rollout_logp is None and (anchor == "rollout" or tis_enabled):
        raise ValueError("rollout_logp is required")
    if anchor == "rollout" and tis_enabled:
        raise ValueError("TIS with the rollout anchor double-counts")
    others = [("old_logp", old_logp), ("mask", mask)]
    if rollout_logp is not None:
        others.append(("rollout_logp", rollout_logp))
    if not (eps_low >= 0 and eps_high > 0):
        raise ValueError("eps")
    _shapes(logp, others, advantages)
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    pad = mask == 0
    if tis_enabled:
        with torch.no_grad():
            tau = (old_logp.masked_fill(pad, 0.0) - rollout_logp.masked_fill(pad, 0.0)).exp().clamp(0.0, 2.0)
        w = (w * tau).masked_fill(pad, 0.0)
    n = max(1, int((~pad).sum()))
    lp = logp.masked_fill(pad, 0.0)
    a = advantages.detach().to(logp.dtype)
    return -torch.einsum("bl,bl,b->", w, lp, a) / n
