"""CORRECT: valid tokens gathered into 1-D vectors with masked_select, the clip and the token-mean computed there; zeros scattered back for the weights with masked_scatter."""
import torch


def _eps(el, eh):
    if not (el >= 0) or not (eh > 0):
        raise ValueError("widths")


def _shape(ref, *ts):
    if ref.dim() != 2:
        raise ValueError("logp must be 2-D")
    for t in ts:
        if t is not None and t.shape != ref.shape:
            raise ValueError("shape mismatch")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _eps(eps_low, eps_high)
    _shape(logp, anchor_logp, mask)
    v = mask != 0
    r = torch.exp(logp.detach().masked_select(v) - anchor_logp.detach().masked_select(v))
    w = r.clamp(1 - eps_low, 1 + eps_high)
    return torch.zeros(logp.shape, dtype=logp.dtype).masked_scatter(v, w)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old", eps_low=1.0,
               eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError("anchor")
    if rollout_logp is None and (anchor == "rollout" or tis_enabled):
        raise ValueError("rollout_logp required")
    if tis_enabled and anchor == "rollout":
        raise ValueError("tis with rollout anchor")
    _eps(eps_low, eps_high)
    _shape(logp, old_logp, mask, rollout_logp)
    if tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError("advantages")
    v = mask != 0
    anc = old_logp if anchor == "old" else rollout_logp
    w = cispo_weights(logp, anc, mask, eps_low, eps_high).masked_select(v)
    if tis_enabled:
        t = torch.exp(old_logp.detach().masked_select(v) - rollout_logp.detach().masked_select(v))
        w = w * t.clamp(0.0, 2.0)
    A = advantages.detach().to(logp.dtype)[:, None].expand(logp.shape).masked_select(v)
    lp = logp.masked_select(v)
    return -(w * A * lp).sum() / max(1, lp.numel())
